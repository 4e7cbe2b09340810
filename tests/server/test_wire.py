"""Every request gets a reply (issue 12.4): a line or body the SDK's parser refuses is answered with the JSON-RPC
error naming the problem, with the request's id whenever it can be read, the same on stdio and over HTTP in both
eras; and the server goes on serving (a health request after each bad one is answered)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_harness.config import HttpSettings, load_settings
from mcp_harness.harness import Harness
from mcp_harness.jsondepth import MAX_MESSAGE_DEPTH, text_depth_exceeds
from mcp_harness.server import build_server, http_app
from mcp_harness.server.wire import tolerant_id, too_deep
from tests.conftest import serving

pytestmark = pytest.mark.anyio

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
Meta = dict[str, Any] | None


def _write(request_id: int, arguments: str, meta: Meta) -> bytes:
    """A `write` call with `arguments` spliced in as raw text (so it can hold what json.dumps would never emit)."""
    envelope = f'"_meta":{json.dumps(meta)},' if meta else ""
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{{{envelope}"name":"write",'
        f'"arguments":{{"address":"~/memory/s.txt",{arguments}}}}}}}'
    ).encode()


def _options(levels: int) -> str:
    return '"content":"x","options":' + '{"a":' * levels + "1" + "}" * levels


FITS = MAX_MESSAGE_DEPTH - 3
"""The deepest `options` a message may carry: the message, params and arguments are the other levels."""


@dataclass(frozen=True)
class Case:
    name: str
    body: Callable[[Meta], bytes]
    """The body, given the era's `_meta` envelope (None in the handshake era)."""
    request_id: int | None
    code: int | None
    """The JSON-RPC error code, or None when the message passes the wire and the verb answers."""
    text: str


CASES = [
    Case("lone surrogate", lambda m: _write(10, '"content":"x\\ud800y"', m), 10, -32602, "lone surrogate"),
    Case("raw 0xFF", lambda m: _write(11, '"content":"x@y"', m).replace(b"@", b"\xff"), 11, -32602, "UTF-8"),
    Case("198 deep", lambda m: _write(12, _options(198), m), 12, -32600, f"deeper than {MAX_MESSAGE_DEPTH} levels"),
    Case("a level too deep", lambda m: _write(13, _options(FITS + 1), m), 13, -32600, "(the limit)"),
    Case("deep enough", lambda m: _write(14, _options(FITS), m), 14, None, "64 levels"),
    Case("not JSON", lambda m: b"hello there", None, -32700, "not valid JSON"),
    Case("truncated", lambda m: b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"na', 15, -32600, "JSON"),
    Case("no method", lambda m: b'{"jsonrpc":"2.0","id":16,"methodx":"ping"}', 16, -32600, "JSON-RPC 2.0"),
    Case("a batch", lambda m: b'[{"jsonrpc":"2.0","id":17,"method":"ping"}]', None, -32600, "one object"),
    Case("a broken reply", lambda m: b'{"jsonrpc":"2.0","id":18,"error":{"code":"x"}}', None, -32600, "a reply"),
    Case("a bool id", lambda m: b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, -32600, "an integer"),
    Case("0xFF, no id", lambda m: b'{"jsonrpc":"2.0","method":"x","params":{"a":"\xff"}}', None, -32700, "UTF-8"),
]


def _check(case: Case, reply: dict[str, Any]) -> None:
    assert reply["jsonrpc"] == "2.0" and reply["id"] == case.request_id, (case.name, reply)
    if case.code is None:
        result = reply["result"]
        assert result["isError"] is True and case.text in result["content"][0]["text"], (case.name, reply)
    else:
        assert reply["error"]["code"] == case.code and case.text in reply["error"]["message"], (case.name, reply)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"\xff', 7),
        (b'{"params":{"s":"}\\"{","n":[1,{"id":3}]},"id":"later","method":"x"', "later"),
        (b'  {"id" : -4 , "x": [', -4),
        (b'{"id":1.5}', None),
        (b'{"id":null}', None),
        (b'{"a":1 "id":2}', None),
        (b'{"id":"\\ud800"}', None),
        (b"[1]", None),
        (b"", None),
    ],
)
def test_tolerant_id_reads_the_top_level_id_of_broken_text(raw: bytes, expected: object) -> None:
    assert tolerant_id(raw) == expected


_TRICKY = st.text(alphabet='[]{}"\\ax\n', max_size=6)
_JSON = st.recursive(
    st.none() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
    max_leaves=30,
)


@given(_JSON, st.integers(min_value=0, max_value=8))
def test_the_fast_depth_check_agrees_with_the_byte_walk(value: Any, limit: int) -> None:
    text = json.dumps(value).encode()
    assert too_deep(text, limit) == text_depth_exceeds(text, limit)
    assert too_deep(text[:-1], limit) == text_depth_exceeds(text[:-1], limit), "truncated text too"


class _Replies:
    """Replies read from a stdout stream, one JSON object per line."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.buffer, self.ready = stream, b"", list[dict[str, Any]]()

    async def until(self, wanted: set[object]) -> dict[object, dict[str, Any]]:
        """Read until a reply for every id in `wanted` (None: an error without an id) has arrived."""
        found: dict[object, dict[str, Any]] = {}
        while not wanted <= set(found):
            while not self.ready:
                self.buffer += await self.stream.receive()
                *lines, self.buffer = self.buffer.split(b"\n")
                self.ready += [json.loads(line) for line in lines if line.strip()]
            reply = self.ready.pop(0)
            found[reply.get("id")] = reply
        return found


async def test_stdio_answers_every_bad_line_and_keeps_serving(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_HARNESS_DATA_DIR": str(tmp_path)}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HANDSHAKE}
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [sys.executable, "-m", "mcp_harness", "serve"], env=env, stderr=subprocess.DEVNULL
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            replies = _Replies(proc.stdout)
            await proc.stdin.send(json.dumps(init).encode() + b"\n")
            await replies.until({1})
            await proc.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            for n, case in enumerate(CASES):
                ping = {"jsonrpc": "2.0", "id": f"health-{n}", "method": "ping"}
                await proc.stdin.send(case.body(None) + b"\n" + json.dumps(ping).encode() + b"\n")
                found = await replies.until({case.request_id, f"health-{n}"})
                _check(case, found[case.request_id])
                assert found[f"health-{n}"]["result"] == {}, case.name
            await proc.stdin.aclose()
            assert await proc.wait() == 0


@pytest.fixture
async def http_base(tmp_path: Path) -> AsyncIterator[str]:
    harness = Harness(load_settings(data_dir=tmp_path))
    async with serving(http_app(build_server(harness), host="127.0.0.1", http=HttpSettings())) as base:
        yield base
    harness.close()


def _sse_reply(text: str) -> dict[str, Any]:
    return next(json.loads(line[5:]) for line in text.splitlines() if line.startswith("data: {"))


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_http_answers_every_bad_body_with_its_id_in_both_eras(http_base: str, era: str) -> None:
    import httpx2

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(base_url=http_base, timeout=30) as http:
        meta: Meta = None
        if era == "2025-11-25":
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HANDSHAKE}
            opened = await http.post("/mcp", json=init, headers=headers)
            headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": era}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post("/mcp", json=initialized, headers=headers)).status_code == 202
        else:
            meta = MODERN
            headers = {**headers, "mcp-protocol-version": era}
        for n, case in enumerate(CASES):
            extra = {"mcp-method": "tools/call", "mcp-name": "write"} if case.code is None else {}
            answer = await http.post("/mcp", content=case.body(meta), headers={**headers, **extra})
            if case.code is None:
                assert answer.status_code == 200, (case.name, answer.text)
                as_json = answer.headers["content-type"] == "application/json"
                reply = answer.json() if as_json else _sse_reply(answer.text)
            else:
                assert answer.status_code == 400 and answer.headers["content-type"] == "application/json", case.name
                reply = answer.json()
            _check(case, reply)
            method = "ping" if meta is None else "tools/list"  # the stateless era has no ping
            check = {"jsonrpc": "2.0", "id": f"health-{n}", "method": method, "params": {"_meta": meta} if meta else {}}
            health = await http.post("/mcp", json=check, headers={**headers, "mcp-method": method})
            assert health.status_code == 200 and f'"id":"health-{n}"' in health.text and '"result":{' in health.text
