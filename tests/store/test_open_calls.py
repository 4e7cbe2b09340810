"""The calls still owed an answer (`open_calls`, m008) and who holds them (`instances`): kept in the transaction of
every event append, backfilled once from an older log, judged alive or dead per holder, and answered at boot —
only those of holders that are gone, from `system`, once, without decoding the log."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import cbor2
import pytest

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.runs.outcomes import INTERRUPTED
from mcp_harness.store import instances
from mcp_harness.store.migrations import migrate
from mcp_harness.store.sessions import Actor
from tests.conftest import scripted_harness
from tests.store.conftest import database_before


def _call(call_id: str, name: str = "call") -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "input": {}}


def _result(call_id: str, name: str = "call") -> dict[str, Any]:
    return {"type": "tool_result", "toolCallId": call_id, "name": name, "output": {}}


def _open(h: Harness, session_id: str) -> list[tuple[str, str, str | None]]:
    return [(c.call_id, c.actor, c.instance_id) for c in h.sessions.open_calls(session_id)]


def test_appends_keep_the_open_calls_in_step_with_the_log(harness: Harness) -> None:
    session = harness.sessions.create(harness.account_id, harness.agent().id)
    me = harness.db.instance_id
    harness.sessions.append_many(session.id, [(_call("quick"), "agent"), (_result("quick"), "agent")])
    with harness.db.reading() as conn:  # a call answered in its own commit was never open, and holds nothing
        assert conn.execute("SELECT COUNT(*) FROM instances").fetchone()[0] == 0
    assert _open(harness, session.id) == []
    harness.sessions.append_many(session.id, [(_call("a"), "agent"), (_call("b"), "user")])
    assert _open(harness, session.id) == [("a", "agent", me), ("b", "user", me)]
    with pytest.raises(RuntimeError), harness.db.transaction():
        harness.sessions.append(session.id, _call("c"), "agent")
        raise RuntimeError("rolled back with the event")
    harness.sessions.append(session.id, _result("a"), "agent")
    assert _open(harness, session.id) == [("b", "user", me)]
    assert harness.sessions.answered_calls(session.id, ["a", "b"]) == {"a"}
    harness.sessions.append(session.id, _result("b"), "user")
    assert _open(harness, session.id) == []


def test_the_migration_backfills_every_call_an_older_log_left_unanswered(tmp_path: Path) -> None:
    conn = database_before(tmp_path / "old.db", "m008_open_calls")
    logs = {
        "s1": [(_call("done"), "agent"), (_result("done"), "agent"), (_call("cut", "delegate"), "agent")],
        "s2": [(_call("mine"), "user"), (_call("again"), "agent"), (_call("again", "read"), "agent")],
    }
    for session_id, log in logs.items():
        conn.execute(
            "INSERT INTO sessions (id, account_id, agent_id, created_at, updated_at) VALUES (?, 'acct', 'agent', 0, 0)",
            (session_id,),
        )
        for seq, (payload, actor) in enumerate(log, start=1):
            conn.execute(
                "INSERT INTO session_events VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, f"{session_id}-{seq}", payload["type"], actor, cbor2.dumps(payload), seq * 10),
            )
    assert "m008_open_calls" in migrate(conn)
    rows = conn.execute("SELECT * FROM open_calls ORDER BY session_id, seq").fetchall()
    assert rows == [
        ("s1", "cut", 3, "delegate", "agent", None, 30),
        ("s2", "mine", 1, "call", "user", None, 10),
        ("s2", "again", 2, "read", "agent", None, 20),  # a repeated id: one row, at its first place
    ]
    conn.close()


# -- who is alive ----------------------------------------------------------------------------------------------------


@pytest.fixture
def conn(harness: Harness) -> Iterator[sqlite3.Connection]:
    with harness.db.transaction() as c:
        yield c


def _row(
    conn: sqlite3.Connection,
    instance_id: str,
    *,
    host: str = instances.HOST,
    pid: int,
    started: str | None,
    heartbeat_at: int,
) -> None:
    conn.execute("INSERT INTO instances VALUES (?, ?, ?, ?, 0, ?)", (instance_id, host, pid, started, heartbeat_at))


def _started(pid: int) -> str:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{boot}:{Path(f'/proc/{pid}/stat').read_text().rpartition(')')[2].split()[19]}"


def test_an_instance_of_this_process_is_alive_until_it_is_gone(conn: sqlite3.Connection) -> None:
    instances.here("engine-1")
    instances.touch(conn, ["engine-1"])
    assert instances.alive(conn, ["engine-1", "never-registered"]) == {"engine-1"}
    instances.gone(conn, "engine-1")
    assert instances.alive(conn, ["engine-1"]) == set()
    _row(conn, "same-pid-not-here", pid=os.getpid(), started=instances.START, heartbeat_at=0)
    assert instances.alive(conn, ["same-pid-not-here"]) == set(), "a closed harness of this process is gone"


def test_another_process_is_alive_while_its_pid_runs_and_is_the_same_process(conn: sqlite3.Connection) -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    proc = subprocess.Popen(["sleep", "60"])
    try:
        _row(conn, "other", pid=proc.pid, started=_started(proc.pid), heartbeat_at=0)
        _row(conn, "reused-pid", pid=proc.pid, started="another-boot:1", heartbeat_at=0)
        assert instances.alive(conn, ["other", "reused-pid"]) == {"other"}
        proc.send_signal(signal.SIGKILL)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead but not reaped: a zombie
        assert instances.alive(conn, ["other"]) == set()
    finally:
        proc.kill()
        proc.wait()
    assert instances.alive(conn, ["other"]) == set()


def test_an_instance_elsewhere_is_alive_while_its_heartbeat_is_fresh(conn: sqlite3.Connection) -> None:
    from mcp_harness.store._util import now_ms

    _row(conn, "fresh", host="elsewhere", pid=1, started=None, heartbeat_at=now_ms())
    _row(conn, "stale", host="elsewhere", pid=1, started=None, heartbeat_at=now_ms() - instances.STALE_MS - 1)
    assert instances.alive(conn, ["fresh", "stale"]) == {"fresh"}
    assert "stale" not in instances.sweep(conn) and instances.alive(conn, ["stale"]) == set()
    assert [r[0] for r in conn.execute("SELECT id FROM instances WHERE id IN ('fresh', 'stale')")] == ["fresh"]


@pytest.mark.anyio
async def test_a_serving_engine_holds_a_row_beats_and_removes_it_when_it_stops(
    harness: Harness,
) -> None:
    harness.engine.heartbeat_ms = 10  # `[runs] heartbeat_s` as the engine took it, shortened

    def beat() -> int | None:
        with harness.db.reading() as conn:
            row = conn.execute("SELECT heartbeat_at FROM instances WHERE id = ?", (harness.engine.owner,)).fetchone()
        return None if row is None else int(row[0])

    async with harness.engine_running():
        first = beat()
        assert first is not None
        with harness.db.reading() as conn:
            assert instances.alive(conn, [harness.engine.owner]) == {harness.engine.owner}
        with anyio.fail_after(30):
            while (beat() or 0) <= first:
                harness.engine.wake()
                await anyio.sleep(0.02)
    assert beat() is None, "a stopped engine leaves no row: what it held is nobody's now"


# -- answering at boot -------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_boot_answers_the_calls_of_gone_instances_in_every_session_and_no_others(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    gone = Harness(settings)
    agent = gone.agent()
    s1 = gone.sessions.create(gone.account_id, agent.id)
    s2 = gone.sessions.create(gone.account_id, agent.id)
    gone.sessions.append(s1.id, _call("agent-call"), "agent")
    gone.sessions.append(s2.id, _call("user-call"), "user")
    gone.sessions.append_many(s2.id, [(_call("answered"), "user"), (_result("answered"), "user")])
    gone.close()
    alive = Harness(settings)  # another holder that is still working: its open call is its own to answer
    alive.sessions.append(s1.id, _call("still-running"), "agent")
    booting = Harness(settings)
    try:
        async with booting.engine_running():
            log1, log2 = booting.sessions.events(s1.id), booting.sessions.events(s2.id)
        answers = [
            (e.payload["toolCallId"], e.actor, e.payload.get("error")) for e in log1 + log2 if e.type == "tool_result"
        ]
        assert sorted(answers) == [
            ("agent-call", "system", INTERRUPTED),
            ("answered", "user", None),
            ("user-call", "system", INTERRUPTED),
        ]
        assert [c.call_id for c in booting.sessions.orphaned_calls(set())] == ["still-running"]
    finally:
        booting.close()
        alive.close()


@pytest.mark.anyio
async def test_the_boot_reads_the_open_calls_not_the_log(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    gone = Harness(settings)
    session = gone.sessions.create(gone.account_id, gone.agent().id)
    history: list[tuple[dict[str, Any], Actor]] = [
        (_call(f"c{i}") if i % 2 == 0 else _result(f"c{i - 1}"), "agent") for i in range(2000)
    ]
    gone.sessions.append_many(session.id, [*history, (_call("cut"), "agent")])
    gone.close()
    booting = Harness(settings)
    statements: list[str] = []
    try:
        booting.db._conn.set_trace_callback(statements.append)
        async with booting.engine_running():
            booting.db._conn.set_trace_callback(None)
        (answer,) = booting.sessions.events(session.id, last=1)
        assert (answer.payload["toolCallId"], answer.actor) == ("cut", "system")
        reads = [s for s in statements if "event_cbor" in s and not s.lstrip().upper().startswith("INSERT")]
        assert reads == [], "the boot decoded the event log"
        assert any("open_calls" in s for s in statements)
    finally:
        booting.close()


@pytest.mark.anyio
async def test_a_turn_leaves_alone_a_call_another_live_instance_has_open_in_its_session(tmp_path: Path) -> None:
    runner = scripted_harness(tmp_path, [{"turns": [{"text": "done"}]}])
    other = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        agent = runner.agent()
        session = runner.sessions.create(runner.account_id, agent.id)
        runner.sessions.append(session.id, {"type": "message", "role": "user", "content": "hello"}, "user")
        other.sessions.append(session.id, _call("elsewhere"), "agent")  # a client bound to this session, there
        run = runner.runs.enqueue(
            account_id=runner.account_id, title="turn", origin="user", agent_id=agent.id, session_id=session.id
        )
        async with runner.engine_running():
            with anyio.fail_after(30):
                done = await runner.engine.wait_for(run.id)
        assert done.status == "succeeded", done.error
        assert [e for e in runner.sessions.events(session.id) if e.type == "tool_result"] == []
        other.close()  # the other holder goes away: its call is nobody's now, and the next boot answers it
        again = runner.runs.enqueue(
            account_id=runner.account_id, title="turn", origin="user", agent_id=agent.id, session_id=session.id
        )
        async with runner.engine_running():
            with anyio.fail_after(30):
                await runner.engine.wait_for(again.id)
        results = [e for e in runner.sessions.events(session.id) if e.type == "tool_result"]
        assert [(e.payload["toolCallId"], e.actor, e.payload["error"]) for e in results] == [
            ("elsewhere", "system", INTERRUPTED)
        ]
    finally:
        other.close()
        runner.close()


@pytest.mark.anyio
async def test_restarts_leave_a_finished_childs_session_alone(tmp_path: Path) -> None:
    from mcp import Client

    from mcp_harness.server import build_server

    h = scripted_harness(tmp_path, [{"turns": [{"text": "done"}]}])
    try:
        async with Client(build_server(h)) as client:
            result = await client.call_tool("delegate", {"brief": "Finish at once"})
            assert isinstance(result.structured_content, dict)
            assert result.structured_content["status"] == "succeeded"
        (child,) = [s for s in h.sessions.list(h.account_id) if s.kind == "child"]
        before = [e.id for e in h.sessions.events(child.id)]
        for _ in range(2):
            async with h.engine_running():
                pass
        assert [e.id for e in h.sessions.events(child.id)] == before, "a boot wrote into a finished child's session"
    finally:
        h.close()
