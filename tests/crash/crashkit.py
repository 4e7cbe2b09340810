"""Driving real `mcp-harness serve` processes for the crash tests: spawn one on stdio, speak JSON-RPC to it by hand,
`kill -9` it, and read what it left from outside (read-only SQLite beside the live writer, the memory files).

Every wait polls a database or file condition with a generous deadline; nothing asserts on how long anything took.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import cbor2
import pytest
from anyio.abc import ByteReceiveStream, Process

TERMINAL = ("succeeded", "failed", "canceled")
PROTOCOL = "2025-11-25"


def rpc(message_id: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        message["id"] = message_id
    if params is not None:
        message["params"] = params
    return (json.dumps(message) + "\n").encode()


@dataclass
class Server:
    """One `serve` process and the replies it has sent, by JSON-RPC id."""

    proc: Process
    replies: dict[int, dict[str, Any]] = field(default_factory=dict)
    closed: bool = False
    """Its stdout ended (it exited or was killed)."""
    _next: int = 1
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def pump(self, stdout: ByteReceiveStream) -> None:
        buffer = b""
        async for chunk in stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    message = json.loads(line)  # stdout carries JSON-RPC only
                    if "id" in message:
                        self.replies[message["id"]] = message
                        self._arrived.set()
        self.closed = True
        self._arrived.set()

    async def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; returns its id (its reply lands in `replies`)."""
        assert self.proc.stdin is not None
        message_id = self._next
        self._next += 1
        await self.proc.stdin.send(rpc(message_id, method, params))
        return message_id

    async def call(self, name: str, arguments: dict[str, Any]) -> int:
        return await self.send("tools/call", {"name": name, "arguments": arguments})

    async def reply(self, message_id: int, timeout: float = 60) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while message_id not in self.replies:
                if self.closed:
                    raise AssertionError(f"the server closed its output before replying to request {message_id}")
                self._arrived = anyio.Event()
                await self._arrived.wait()
        return self.replies[message_id]

    async def result(self, name: str, arguments: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        """Call a tool and return its `structuredContent`, failing the test on an error."""
        reply = await self.reply(await self.call(name, arguments), timeout)
        assert "result" in reply and not reply["result"].get("isError"), reply
        return reply["result"]["structuredContent"]

    async def kill(self) -> None:
        """SIGKILL: no shutdown path runs."""
        os.kill(self.proc.pid, signal.SIGKILL)
        with anyio.fail_after(15):
            await self.proc.wait()


@asynccontextmanager
async def serving(data_dir: Path, config: Path, log: IO[bytes]) -> AsyncIterator[Server]:
    """A `serve` process on stdio, initialized and its boot sweep done; on exit it is shut down, or reaped."""
    argv = [sys.executable, "-m", "mcp_harness", "serve", "--data-dir", str(data_dir), "--config", str(config)]
    proc = await anyio.open_process(argv, stderr=log)
    server = Server(proc)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.pump, proc.stdout)
            params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "crash", "version": "0"}}
            try:
                reply = await server.reply(await server.send("initialize", params))
            except AssertionError as exc:
                log.flush()
                raise AssertionError(f"{exc}; its log:\n{tail(Path(log.name))}") from None
            assert "result" in reply, reply
            await proc.stdin.send(rpc(None, "notifications/initialized"))
            # A stdio serve starts its engine just after the handshake (ENGINE_AFTER_S); its boot sweep commits the
            # process's instance row, so that row says the sweep is done.
            await until(lambda: _booted(data_dir / "harness.db", proc.pid), "the boot sweep", 30, Path(log.name))
            yield server
            if proc.returncode is None:
                await proc.stdin.aclose()  # a stdio server serves until its client goes away
                with anyio.fail_after(30):
                    await proc.wait()
            tg.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            with anyio.CancelScope(shield=True):
                await proc.wait()
        with anyio.CancelScope(shield=True):
            await proc.aclose()


def _booted(db: Path, pid: int) -> bool:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT 1 FROM instances WHERE pid = ?", (pid,)).fetchone() is not None
    finally:
        conn.close()


def write_config(tmp: Path, rules: list[dict[str, Any]]) -> Path:
    """A config whose `scripted` provider answers by `rules`; returns its path (the rules file sits beside it)."""
    script = tmp / "script.json"
    script.write_text(json.dumps({"rules": rules}))
    config = tmp / "config.toml"
    config.write_text(
        f'log_level = "INFO"\n\n[providers.scripted]\ntype = "scripted"\nfile = {json.dumps(str(script))}\n'
    )
    return config


def ledger_tree_rules(coordinator: str, leaves: list[str], *, delay_ms: int, final_text: str) -> list[dict[str, Any]]:
    """A coordinator that delegates `leaves` at once; leaf i appends `leaf-i` to `ledger.txt` (a sandboxed shell call:
    the side effect a crash must not repeat), then waits `delay_ms` for its model's second reply."""

    def execute(i: int) -> dict[str, Any]:
        shell = {"runtime": "shell", "code": f"echo leaf-{i} >> ledger.txt"}
        return {"name": "call", "input": {"tool": "execute", "input": shell}}

    rules: list[dict[str, Any]] = [
        {"when": brief, "turns": [{"toolCalls": [execute(i)]}, {"delayMs": delay_ms, "text": f"leaf {i} done"}]}
        for i, brief in enumerate(leaves)
    ]
    rules.append(
        {
            "when": coordinator,
            "turns": [
                {"toolCalls": [{"name": "delegate", "input": {"brief": b}} for b in leaves]},
                {"text": final_text},
            ],
        }
    )
    return rules


def require_sandbox(tmp: Path) -> None:
    from mcp_harness.config import load_settings
    from mcp_harness.harness import Harness

    probe = Harness(load_settings(data_dir=tmp / "probe"))
    try:
        if "shell" not in probe.sandbox_runtimes():
            pytest.skip("these crashes run shell in the bubblewrap sandbox, which this host cannot run")
    finally:
        probe.close()


# -- reading the data dir from outside ------------------------------------------------------------------------------


def connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def query(db_path: Path, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    with closing(connect(db_path)) as conn:
        return conn.execute(sql, args).fetchall()


def runs(db_path: Path) -> list[dict[str, Any]]:
    return [
        {
            **dict(row),
            "input": cbor2.loads(row["input_cbor"]) if row["input_cbor"] else {},
            "usage": cbor2.loads(row["usage_cbor"]) if row["usage_cbor"] else {},
            "output": cbor2.loads(row["output_cbor"]) if row["output_cbor"] else None,
            "error": cbor2.loads(row["error_cbor"]) if row["error_cbor"] else None,
        }
        for row in query(db_path, "SELECT * FROM runs ORDER BY created_at, id")
    ]


def events(db_path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every session's events in `seq` order: the payload plus `seq`, `eventId` and `actor`."""
    with closing(connect(db_path)) as conn:
        sessions = [r["id"] for r in conn.execute("SELECT id FROM sessions").fetchall()]
        rows = conn.execute("SELECT session_id, seq, id, actor, event_cbor FROM session_events ORDER BY seq").fetchall()
    by_session: dict[str, list[dict[str, Any]]] = {sid: [] for sid in sessions}
    for row in rows:
        payload = cbor2.loads(row["event_cbor"])
        by_session.setdefault(row["session_id"], []).append(
            {**payload, "seq": row["seq"], "eventId": row["id"], "actor": row["actor"]}
        )
    return by_session


def results_of(log: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [e for e in log if e["type"] == "tool_result" and e.get("toolCallId") == call_id]


def answer_problems(log_by_session: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Every logged call answered exactly once, every answer of a logged call, in every session."""
    problems: list[str] = []
    for session_id, log in log_by_session.items():
        calls = [e["id"] for e in log if e["type"] == "tool_call"]
        answers = [e.get("toolCallId") for e in log if e["type"] == "tool_result"]
        for call_id in calls:
            if answers.count(call_id) != 1:
                problems.append(f"session {session_id}: call {call_id} has {answers.count(call_id)} results")
        problems += [f"session {session_id}: result {a} answers no call" for a in answers if a not in calls]
    return problems


def ledger(data_dir: Path) -> list[str]:
    """The lines of `ledger.txt` in the (one) agent's memory."""
    paths = list(data_dir.glob("agents/*/memory/ledger.txt"))
    assert len(paths) <= 1, paths
    return paths[0].read_text().splitlines() if paths else []


def memory_dir(data_dir: Path) -> Path:
    (path,) = data_dir.glob("agents/*/memory")
    return path


def tail(log: Path, lines: int = 80) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else "(no log)"


async def until(condition: Callable[[], bool], what: str, timeout: float, log: Path) -> None:
    """Poll `condition` (another process's database has no event to await) until true, or fail saying `what`."""

    def holds() -> bool:
        try:
            return condition()
        except (sqlite3.OperationalError, FileNotFoundError, ValueError):
            return False  # no database or file yet, or its tables are still being created

    try:
        with anyio.fail_after(timeout):
            while not holds():
                await anyio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out after {timeout}s waiting for {what}; server log:\n{tail(log)}")


def all_terminal(db_path: Path) -> bool:
    return all(r["status"] in TERMINAL for r in runs(db_path))
