"""`tools/call` answered on the stdio wire (`server/wire_calls.py`), against a real `serve` process spoken to in raw
JSON-RPC: the same answer (the same JSON) as the SDK's pipeline gives the same request; everything the wire path
does not take still reaches the SDK (and gets its error); a cancelled call is cancelled, unanswered and logged as
canceled; requests piped and then stdin closed are all answered."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from tests.upstream.conftest import fixture_command

pytestmark = pytest.mark.anyio

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


def _request(request_id: object, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"


def _call(request_id: object, name: Any, arguments: Any, **meta: Any) -> bytes:
    return _request(request_id, "tools/call", {"name": name, "arguments": arguments, "_meta": {**ENVELOPE, **meta}})


class _Wire:
    """A `serve` process's stdin and its replies by id."""

    def __init__(self, proc: anyio.abc.Process, log: Path) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin, self.stdout, self.log = proc, proc.stdin, proc.stdout, log
        self.buffer, self.replies = b"", dict[object, dict[str, Any]]()

    async def send(self, *lines: bytes) -> None:
        await self.stdin.send(b"".join(lines))

    async def until(self, *ids: object) -> list[dict[str, Any]]:
        while not set(ids) <= set(self.replies):
            self.buffer += await self.stdout.receive()
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    frame = json.loads(line)
                    if "id" in frame:  # notifications (progress) are not replies
                        self.replies[frame["id"]] = frame
        return [self.replies[i] for i in ids]

    def answered_here(self) -> set[str]:
        """The ids the wire path answered, from the server's debug log."""
        marker = "answering request "
        return {
            line.split(marker, 1)[1].split(" (", 1)[0].strip("'")
            for line in self.log.read_text().splitlines()
            if marker in line
        }


@asynccontextmanager
async def _serving(tmp_path: Path, config: str = "") -> AsyncIterator[_Wire]:
    (tmp_path / "config.toml").write_text(config)
    log = tmp_path / "serve.log"
    env = {
        **os.environ,
        "MCP_HARNESS_DATA_DIR": str(tmp_path / "data"),
        "MCP_HARNESS_CONFIG": str(tmp_path / "config.toml"),
        "MCP_HARNESS_LOG_LEVEL": "DEBUG",
    }
    with log.open("w") as err, anyio.fail_after(90):
        async with await anyio.open_process([sys.executable, "-m", "mcp_harness", "serve"], env=env, stderr=err) as p:
            yield _Wire(p, log)


def _without_request_ids(reply: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in reply.items() if k != "id"}


async def test_a_call_answered_on_the_wire_is_the_answer_the_sdk_pipeline_gives(tmp_path: Path) -> None:
    async with _serving(tmp_path) as wire:
        await wire.send(_request(1, "tools/list", {"_meta": ENVELOPE}))  # the first request opens the era
        await wire.until(1)
        await wire.send(_call("seed", "write", {"address": "~/memory/notes.md", "content": "# Notes\nalpha\n"}))
        await wire.until("seed")
        cases = [
            ("read", {"address": "~/memory/notes.md"}),
            ("read", {"address": "~/tools/read"}),
            ("read", {"address": "~/memory/absent.md"}),  # a refusal: isError, the verb's message
            ("call", {"tool": "no_such_tool", "input": {}}),  # an unknown callable: touch-expand
            ("read", {"adress": "~/memory/notes.md"}),  # invalid input: the contract and what was wrong
            ("plan", {}),
        ]
        for n, (name, arguments) in enumerate(cases):
            # The twin carries a progress token, which only the SDK's pipeline serves: the same request otherwise.
            await wire.send(_call(f"w{n}", name, arguments), _call(f"sdk{n}", name, arguments, progressToken=f"p{n}"))
            here, sdk = await wire.until(f"w{n}", f"sdk{n}")
            assert "result" in here, here
            assert _without_request_ids(here) == _without_request_ids(sdk), name
        await wire.stdin.aclose()
        assert await wire.proc.wait() == 0
    answered = wire.answered_here()
    assert {f"w{n}" for n in range(len(cases))} | {"seed"} <= answered
    assert not {a for a in answered if a.startswith("sdk")}


async def test_what_the_wire_does_not_take_still_reaches_the_sdk(tmp_path: Path) -> None:
    async with _serving(tmp_path) as wire:
        await wire.send(_request(1, "tools/list", {"_meta": ENVELOPE}))
        await wire.until(1)
        bad_params = {"code": -32602}
        await wire.send(
            _call("args-text", "read", "not an object"),
            _call("name-list", ["read"], {"address": "~/self"}),
            _call("unknown-verb", "frobnicate", {}),
            _request(
                "extra",
                "tools/call",
                {"name": "read", "arguments": {"address": "~/self"}, "task": {}, "_meta": ENVELOPE},
            ),
            _call(
                "old-version",
                "read",
                {"address": "~/self"},
                **{"io.modelcontextprotocol/protocolVersion": "1999-01-01"},
            ),
            _request("no-envelope", "tools/call", {"name": "read", "arguments": {"address": "~/self"}}),
        )
        args_text, name_list, unknown, extra, old, bare = await wire.until(
            "args-text", "name-list", "unknown-verb", "extra", "old-version", "no-envelope"
        )
        assert args_text["error"]["code"] == bad_params["code"] and name_list["error"]["code"] == bad_params["code"]
        assert unknown["error"]["code"] == bad_params["code"] and "frobnicate" in unknown["error"]["message"]
        assert extra["id"] == "extra"  # a param the wire path does not know (here `task`): the SDK's to answer
        assert old["error"]["code"] == -32022  # UNSUPPORTED_PROTOCOL_VERSION, the SDK's own answer
        assert bare["error"]["code"] == bad_params["code"]  # an envelope is required on this connection
        await wire.stdin.aclose()
        assert await wire.proc.wait() == 0
    assert wire.answered_here() == set()


async def test_a_handshake_era_connection_is_served_by_the_sdk_alone(tmp_path: Path) -> None:
    async with _serving(tmp_path) as wire:
        await wire.send(_request(1, "initialize", HANDSHAKE))
        await wire.until(1)
        await wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        await wire.send(_request(2, "tools/call", {"name": "read", "arguments": {"address": "~/self"}}))
        (reply,) = await wire.until(2)
        assert reply["result"]["isError"] is False
        await wire.stdin.aclose()
        assert await wire.proc.wait() == 0
    assert wire.answered_here() == set()


async def test_a_cancelled_call_on_the_wire_is_cancelled_unanswered_and_logged(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    config = f'[[mcp.servers]]\nname = "fx"\ncommand = {json.dumps(fixture_command(marks))}\ntimeout_s = 30\n'
    async with _serving(tmp_path, config) as wire:
        await wire.send(_request(1, "tools/list", {"_meta": ENVELOPE}))
        await wire.until(1)
        await wire.send(_call("slow", "call", {"tool": "mcp__fx__slow", "input": {"seconds": 30}}))
        while not (marks / "slow-started").exists():
            await anyio.sleep(0.02)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}}
        await wire.send(json.dumps(cancel).encode() + b"\n")
        while not (marks / "cancelled").exists():  # our cancellation reached the upstream call
            await anyio.sleep(0.02)
        await wire.send(_call("after", "call", {"tool": "mcp__fx__echo", "input": {"text": "still"}}))
        (after,) = await wire.until("after")
        assert after["result"]["structuredContent"] == {"result": "still"}
        await wire.stdin.aclose()
        assert await wire.proc.wait() == 0
    assert "slow" not in wire.replies  # a cancelled request gets no reply
    assert {"slow", "after"} <= wire.answered_here()
    with sqlite3.connect(tmp_path / "data" / "harness.db") as db:
        assert db.execute("SELECT COUNT(*) FROM open_calls").fetchone() == (0,)
        kinds = [t for (t,) in db.execute("SELECT type FROM session_events ORDER BY session_id, seq")]
    assert kinds.count("tool_call") == kinds.count("tool_result")  # the cancelled call was answered in the log


async def test_calls_piped_then_stdin_closed_are_all_answered(tmp_path: Path) -> None:
    async with _serving(tmp_path) as wire:
        calls = [_call(f"r{n}", "read", {"address": "~/tools/"}) for n in range(20)]
        await wire.send(_request(1, "tools/list", {"_meta": ENVELOPE}), *calls)
        await wire.stdin.aclose()
        replies = await wire.until(1, *[f"r{n}" for n in range(20)])
        assert all("result" in r for r in replies)
        assert await wire.proc.wait() == 0
    assert {f"r{n}" for n in range(20)} <= wire.answered_here()


async def test_a_call_cancelled_while_it_cannot_be_interrupted_still_gets_no_reply(tmp_path: Path) -> None:
    # A quick verb runs on a worker thread, which a cancel cannot stop: it finishes, and its answer is dropped, as
    # the SDK drops a handler's answer once the client has cancelled the request.
    async with _serving(tmp_path) as wire:
        await wire.send(_request(1, "tools/list", {"_meta": ENVELOPE}))
        await wire.until(1)
        other = sqlite3.connect(tmp_path / "data" / "harness.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock: the write waits for it
        await wire.send(_call("held", "write", {"address": "~/memory/held.md", "content": "x"}))
        await anyio.sleep(0.3)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "held"}}
        await wire.send(json.dumps(cancel).encode() + b"\n")
        await anyio.sleep(0.2)
        other.execute("ROLLBACK")
        other.close()
        after: dict[str, Any] = {}
        for n in range(100):  # the write retries for the lock on SQLite's own backoff: read until it has landed
            await wire.send(_call(f"after-{n}", "read", {"address": "~/memory/held.md"}))
            (after,) = await wire.until(f"after-{n}")
            if after["result"]["isError"] is False:
                break
            await anyio.sleep(0.05)
        await wire.stdin.aclose()
        assert await wire.proc.wait() == 0
    assert after["result"]["isError"] is False  # the write did happen: only its reply was dropped
    assert "held" not in wire.replies and {"held", "after-0"} <= wire.answered_here()


async def test_a_cancellation_names_its_request_as_the_sdk_reads_ids(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    config = f'[[mcp.servers]]\nname = "fx"\ncommand = {json.dumps(fixture_command(marks))}\ntimeout_s = 30\n'

    async def started() -> None:
        while not (marks / "slow-started").exists():
            await anyio.sleep(0.02)
        (marks / "slow-started").unlink()

    async with _serving(tmp_path, config) as wire:
        await wire.send(_request(0, "tools/list", {"_meta": ENVELOPE}))
        await wire.until(0)
        await wire.send(_call(5, "call", {"tool": "mcp__fx__slow", "input": {"seconds": 30}}))
        await started()
        await wire.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"5"}}\n')
        while not (marks / "cancelled").exists():  # "5" is request 5
            await anyio.sleep(0.02)
        await wire.send(_call(1, "call", {"tool": "mcp__fx__slow", "input": {"seconds": 1}}))
        await started()
        await wire.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}\n')
        (one,) = await wire.until(1)  # `true` is not request 1: it runs to its end and is answered
        assert one["result"]["structuredContent"] == {"result": "slept 1.0s"}
        await wire.stdin.aclose()
        assert await wire.proc.wait() == 0
    assert 5 not in wire.replies and {"5", "1"} <= wire.answered_here()
