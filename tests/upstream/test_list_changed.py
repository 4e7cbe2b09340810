"""An upstream's `notifications/tools/list_changed` (issue 20 point 2): its tools are listed again and only the
documents whose contract changed are rewritten. The raw server speaks the handshake era, where a server sends it
unasked; the Python SDK fixture speaks 2026-07-28, where it arrives on the `subscriptions/listen` stream we hold."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_harness.server import build_server
from tests.upstream.conftest import fixture_command, mounting

pytestmark = pytest.mark.anyio


async def test_a_list_changed_notification_rewrites_only_the_new_contract(tmp_path: Path) -> None:
    h = mounting(
        tmp_path, [{"name": "raw", "command": [sys.executable, str(Path(__file__).with_name("raw_server.py"))]}]
    )
    try:
        async with Client(build_server(h), mode="legacy") as c:
            assert not (await c.call_tool("call", {"tool": "mcp__raw__pid", "input": {}})).is_error
            before = {r.name: (r.cid, r.updated_at) for r in h.upstream_store.tools(["raw"])}
            assert "mcp__raw__grown" not in before
            await c.call_tool("call", {"tool": "mcp__raw__grow", "input": {}})
            with anyio.fail_after(10):
                while "mcp__raw__grown" not in {r.name for r in h.upstream_store.tools(["raw"])}:
                    await anyio.sleep(0.02)
            after = {r.name: (r.cid, r.updated_at) for r in h.upstream_store.tools(["raw"])}
            assert {n: v for n, v in after.items() if n != "mcp__raw__grown"} == before
            result = await c.call_tool("call", {"tool": "mcp__raw__grown", "input": {}})
            assert result.is_error  # listed and routed: the raw server answers every other call with an error
    finally:
        h.close()


async def test_a_2026_07_28_server_tells_of_a_new_tool_on_the_listen_stream(tmp_path: Path) -> None:
    h = mounting(tmp_path, [{"name": "fx", "command": fixture_command(tmp_path), "timeout_s": 20}])
    try:
        async with Client(build_server(h), mode="legacy") as c:
            assert not (await c.call_tool("call", {"tool": "mcp__fx__echo", "input": {"text": "hi"}})).is_error
            before = {r.name: r.cid for r in h.upstream_store.tools(["fx"])}
            grown = await c.call_tool("call", {"tool": "mcp__fx__grow", "input": {"name": "sprout"}})
            assert not grown.is_error
            with anyio.fail_after(10):
                while "mcp__fx__sprout" not in {r.name for r in h.upstream_store.tools(["fx"])}:
                    await anyio.sleep(0.02)
            after = {r.name: r.cid for r in h.upstream_store.tools(["fx"])}
            assert {n: cid for n, cid in after.items() if n != "mcp__fx__sprout"} == before
            echoed = await c.call_tool("call", {"tool": "mcp__fx__sprout", "input": {"text": "leaf"}})
            assert not echoed.is_error and "leaf" in str(echoed.content[0])
    finally:
        h.close()
