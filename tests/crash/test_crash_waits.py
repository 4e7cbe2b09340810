"""`kill -9` a real `serve` while a script child sleeps, restart it on the same data dir, and check the sleep held:
the script resumes once its journaled `wakeAt` has passed (not before, and not from a fresh timer), nothing before
the sleep runs again, and the MCP caller's session gets the script's result once, from the restarted server.

Two ways to sleep: parked durably (the run `waiting` with `not_before = wakeAt`, no task held — the server runs with
the park threshold lowered to 1 s so that a short real sleep parks) and held in the execution (a sleep below the
threshold, which the crash cuts short: the boot sweep requeues the run and the replay waits out what is left).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import cbor2
import pytest

from tests.crash.crashkit import PROTOCOL, Server, answer_problems, events, query, rpc, runs, tail, until, write_config

pytestmark = pytest.mark.anyio

SLEEP_MS = 1_500
SCRIPT = f"""
def main(ctx):
    ctx.log("info", "before the sleep")
    ctx.sleep({SLEEP_MS})
    return {{"after": ctx.now()}}
"""
SERVE = """
import sys
from mcp_harness.runs import script_waits
script_waits.PARK_THRESHOLD_MS = int(sys.argv[1])
from mcp_harness.cli import main
sys.exit(main(sys.argv[2:]))
"""
"""`mcp-harness serve` with the park threshold set: the only change from the command a user runs."""


@asynccontextmanager
async def serving(data_dir: Path, config: Path, log: IO[bytes], threshold_ms: int) -> AsyncIterator[Server]:
    """crashkit's `serving`, with the park threshold lowered: an initialized stdio server, reaped at the end."""
    argv = [
        sys.executable,
        "-c",
        SERVE,
        str(threshold_ms),
        "serve",
        "--data-dir",
        str(data_dir),
        "--config",
        str(config),
    ]
    proc = await anyio.open_process(argv, stderr=log)
    server = Server(proc)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.pump, proc.stdout)
            params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "crash", "version": "0"}}
            reply = await server.reply(await server.send("initialize", params))
            assert "result" in reply, reply
            await proc.stdin.send(rpc(None, "notifications/initialized"))
            yield server
            if proc.returncode is None:
                await proc.stdin.aclose()
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


def journal(db: Path, run_id: str) -> list[dict[str, Any]]:
    rows = query(db, "SELECT entry_cbor FROM run_journal WHERE run_id = ? ORDER BY seq", (run_id,))
    return [cbor2.loads(r["entry_cbor"]) for r in rows]


def script_run(db: Path) -> dict[str, Any] | None:
    found = [r for r in runs(db) if r["kind"] == "workflow"]
    return found[0] if found else None


async def crash_while_sleeping(tmp_path: Path, threshold_ms: int, status: str) -> tuple[dict[str, Any], Path]:
    """Start the script, kill the server once its run is `status` with its timer journaled, restart and let the
    script finish. Returns the finished run and the database path."""
    data, log_path = tmp_path / "data", tmp_path / "serve.log"
    db = data / "harness.db"
    config = write_config(tmp_path, [{"turns": [{"text": "done"}]}])
    with log_path.open("ab") as log:
        async with serving(data, config, log, threshold_ms) as first:
            await first.call("delegate", {"script": SCRIPT, "title": "sleeper"})

            def sleeping() -> bool:
                run = script_run(db)
                return (
                    run is not None
                    and run["status"] == status
                    and any(e["kind"] == "timer" for e in journal(db, run["id"]))
                )

            await until(sleeping, f"the script {status} in its sleep", 30, log_path)
            await first.kill()
        run = script_run(db)
        assert run is not None and run["status"] == status  # the kill left it there
        async with serving(data, config, log, threshold_ms):
            await until(
                lambda: (script_run(db) or {}).get("status") == "succeeded", "the script to finish", 30, log_path
            )
            # The caller's delegate call died with the first process; its answer comes once the result is delivered.
            await until(lambda: not answer_problems(events(db)), "the caller's call answered", 30, log_path)
    finished = script_run(db)
    assert finished is not None, tail(log_path)
    return finished, db


async def test_a_parked_sleep_survives_kill_9_and_resumes_on_time(tmp_path: Path) -> None:
    run, db = await crash_while_sleeping(tmp_path, threshold_ms=1_000, status="waiting")
    entries = journal(db, run["id"])
    (timer,) = [e for e in entries if e["kind"] == "timer"]
    assert [e["kind"] for e in entries] == [
        "log",
        "timer",
        "fired",
        "now",
    ]  # no effect repeated, one timer, not restarted
    assert run["output"]["after"] >= timer["wakeAt"]  # resumed once due, never before
    assert not answer_problems(events(db))


async def test_a_held_sleep_cut_short_by_kill_9_waits_out_the_rest(tmp_path: Path) -> None:
    run, db = await crash_while_sleeping(tmp_path, threshold_ms=60_000, status="running")
    entries = journal(db, run["id"])
    (timer,) = [e for e in entries if e["kind"] == "timer"]
    assert [e["kind"] for e in entries] == ["log", "timer", "fired", "now"]
    assert run["output"]["after"] >= timer["wakeAt"]
    assert run["attempt"] == 2  # the boot sweep requeued it: one more execution, the same timer
