"""A big memory file over real Streamable HTTP (issue 13.7): the official client drops any server-sent event over
1 MiB, and a 600 KB file sent as text and again as structuredContent used to be one."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from tests.conftest import text_of

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_600_kb_file_reads_over_http_in_pages(http_server: tuple[str, Harness], mode: str) -> None:
    base, harness = http_server
    root = harness.agent().memory_dir
    root.mkdir(parents=True, exist_ok=True)
    body = "".join(f"{i:07d} naïve café — ok\n" for i in range(24_000))  # ≈ 620 KB of UTF-8
    assert len(body.encode("utf-8")) > 600_000
    (root / "big.log").write_text(body, encoding="utf-8")
    with anyio.fail_after(60):
        async with Client(f"{base}/mcp", mode=mode) as c:
            parts: list[str] = []
            options: dict[str, Any] = {}
            pages = 0
            while True:
                result = await c.call_tool("read", {"address": "~/memory/big.log", "options": options})
                assert not result.is_error, result.content
                data = result.structured_content
                assert isinstance(data, dict) and data["contentInText"] is True and "content" not in data
                parts.append(text_of(result)[: data["length"]])
                pages += 1
                if "nextOffset" not in data:
                    break
                options = {"offset": data["nextOffset"]}
    assert "".join(parts) == body and pages == 4


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_long_transcript_read_as_json_is_sent_once_over_http(
    http_server: tuple[str, Harness], mode: str
) -> None:
    """A thread read as JSON carries its 256 KiB transcript and its events; text and structuredContent together
    passed the client's 1 MiB event limit. Past 128 KiB the body goes once, in the text."""
    base, harness = http_server
    session = harness.sessions.create(harness.account_id, harness.agent().id, title="Long")
    line = "naïve café — " * 100
    harness.sessions.append_many(
        session.id, [({"type": "message", "role": "user", "content": f"{i} {line}"}, "user") for i in range(200)]
    )
    with anyio.fail_after(60):
        async with Client(f"{base}/mcp", mode=mode) as c:
            result = await c.call_tool("read", {"address": f"thread:{session.id}", "format": "json"})
    assert not result.is_error
    data = result.structured_content
    assert isinstance(data, dict) and data["contentInText"] is True and data["sessionId"] == session.id
    assert "events" not in data and "markdown" not in data
    whole = json.loads(text_of(result))
    assert len(whole["events"]) == 200 and whole["events"][-1]["content"].startswith("199 naïve café")
