"""Failures read as failures of that server (issue 20 point 5): not running, timed out, crashed mid-call (the call
answers "interrupted" and the server restarts), a protocol-level refusal; one broken server never affects another."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call
from tests.upstream.conftest import fixture_command, mounting

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def broken_harness(tmp_path_factory: pytest.TempPathFactory, marks: Path) -> Iterator[Harness]:
    """`fx` (the fixture), `quick` (the fixture again, with a 1 s timeout), `bad` (a command that does not exist) and
    `raw` (a server breaking the protocol)."""
    home = tmp_path_factory.mktemp("broken")
    h = mounting(
        home,
        [
            {"name": "fx", "command": fixture_command(marks), "timeout_s": 20},
            {"name": "quick", "command": fixture_command(marks), "timeout_s": 1},
            {"name": "bad", "command": [str(home / "no-such-server")], "timeout_s": 5},
            {"name": "raw", "command": [sys.executable, str(Path(__file__).with_name("raw_server.py"))]},
        ],
    )
    yield h
    h.close()


@pytest.fixture(scope="module")
async def client(broken_harness: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(broken_harness), mode="legacy") as c:
        yield c


async def failed(c: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await c.call_tool("call", {"tool": tool, "input": arguments})
    assert result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content["error"]


async def test_a_server_that_cannot_start_is_named_and_the_others_still_work(client: Client) -> None:
    error = await failed(client, "mcp__bad__anything", {})
    assert error["code"] == "upstream"
    assert error["message"].startswith("MCP server bad is not running: its command was not found")
    listing = await call(client, "read", {"address": "~/tools/"})
    assert "MCP server bad: its tools are unavailable now. MCP server bad is not running" in listing["markdown"]
    assert "mcp__fx__echo" in listing["tools"]
    assert await call(client, "call", {"tool": "mcp__fx__echo", "input": {"text": "fine"}}) == {"result": "fine"}


async def test_a_call_past_the_servers_timeout_fails_naming_it(client: Client) -> None:
    error = await failed(client, "mcp__quick__slow", {"seconds": 30})
    assert error["code"] == "upstream"
    assert error["message"].startswith("MCP server quick did not answer tool slow within 1s (its timeout)")
    assert await call(client, "call", {"tool": "mcp__fx__echo", "input": {"text": "ok"}}) == {"result": "ok"}


async def test_a_server_killed_mid_call_answers_interrupted_and_restarts(client: Client, marks: Path) -> None:
    first = (await call(client, "call", {"tool": "mcp__fx__pid", "input": {}}))["result"]
    assert (await call(client, "call", {"tool": "mcp__fx__pid", "input": {}}))["result"] == first  # kept warm
    (marks / "slow-started").unlink(missing_ok=True)
    outcome: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:

        async def slow() -> None:
            outcome.update(await failed(client, "mcp__fx__slow", {"seconds": 30}))

        tg.start_soon(slow)
        with anyio.fail_after(20):
            while not (marks / "slow-started").exists():
                await anyio.sleep(0.02)
        os.kill(first, signal.SIGKILL)
    assert outcome["code"] == "interrupted"
    assert outcome["message"].startswith("MCP server fx stopped while running tool slow: the call was interrupted")
    again = (await call(client, "call", {"tool": "mcp__fx__pid", "input": {}}))["result"]
    assert isinstance(again, int) and again != first


async def test_protocol_errors_name_the_server(client: Client) -> None:
    error = await failed(client, "mcp__raw__rpc_error", {})
    assert error["code"] == "upstream"
    assert error["message"] == "MCP server raw refused tool rpc_error: the raw server broke (JSON-RPC error -32603)."
    error = await failed(client, "mcp__raw__malformed", {})
    assert error["message"] == "MCP server raw answered tool malformed with something that is not MCP (protocol error)."
    assert await call(client, "call", {"tool": "mcp__fx__echo", "input": {"text": "ok"}}) == {"result": "ok"}


async def test_the_servers_stop_when_serving_stops(tmp_path: Path) -> None:
    h = mounting(
        tmp_path, [{"name": "raw", "command": [sys.executable, str(Path(__file__).with_name("raw_server.py"))]}]
    )
    try:
        async with Client(build_server(h), mode="legacy") as c:
            result = await c.call_tool("call", {"tool": "mcp__raw__pid", "input": {}})
            pid = int(result.content[0].text)  # pyright: ignore[reportAttributeAccessIssue]
            os.kill(pid, 0)  # alive while we serve
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        h.close()
