"""Large values of tool events stored once by hash (store/payloads.py) and the rowid event log (m012): what is read
back is what was appended, byte for byte, through `events()`, `thread:<id>` and `run:<id>`; equal values share one row
across events and sessions; an older database is migrated with its large events split."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import cbor2
import pytest
from mcp import Client

from mcp_harness.errors import StorageError
from mcp_harness.harness import Harness
from mcp_harness.runs import Succeeded
from mcp_harness.scope import Scope
from mcp_harness.server import build_server
from mcp_harness.store import payloads
from mcp_harness.store.db import Database
from mcp_harness.store.migrations import migrate
from mcp_harness.store.runs import RunStore
from mcp_harness.store.sessions import SessionStore
from mcp_harness.verbs.base import VerbContext
from tests.store.conftest import database_before

BIG = "".join(f"line {i:05d}: the quick brown fox — ünïcödé too\n" for i in range(2400))  # ~110 KB of UTF-8


def _rows(h: Harness, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    with h.db.reading() as conn:
        return conn.execute(sql, args).fetchall()


def _agent_context(h: Harness, session_id: str) -> VerbContext:
    """The context the server's own agent loop calls verbs in (a run's): its reads keep the content in `data`."""
    agent = h.agent()
    run = h.runs.enqueue(account_id=h.account_id, title="turn", origin="user", agent_id=agent.id, session_id=session_id)
    return VerbContext(
        services=h, agent=agent, session_id=session_id, actor="agent", scope=Scope.of_run(run), run_id=run.id
    )


def _events(big: str, *, binary: bool = True) -> list[tuple[dict[str, Any], Any]]:
    """A read of a big file and a write of it; `binary` adds a byte string (CBOR carries one; JSON views cannot)."""
    parts: list[Any] = [big, {"again": big}, *([b"\x00" * 5000] if binary else [])]
    return [
        ({"type": "message", "role": "user", "content": "read it " + big[:5000]}, "user"),
        ({"type": "tool_call", "id": "c1", "name": "read", "input": {"address": "~/memory/big.txt"}}, "agent"),
        (
            {
                "type": "tool_result",
                "toolCallId": "c1",
                "name": "read",
                "output": {"summary": "Read it.", "content": big, "parts": parts},
                "meta": {"durationMs": 3},
            },
            "agent",
        ),
        ({"type": "tool_call", "id": "c2", "name": "write", "input": {"address": "~/x", "content": big}}, "agent"),
        ({"type": "tool_result", "toolCallId": "c2", "name": "write", "output": {"summary": "x" * 3000}}, "agent"),
    ]


def test_a_large_value_is_stored_once_and_every_event_reads_back_as_appended(harness: Harness) -> None:
    agent = harness.agent()
    one = harness.sessions.create(harness.account_id, agent.id)
    two = harness.sessions.create(harness.account_id, agent.id)
    appended = [
        *harness.sessions.append_many(one.id, _events(BIG)),
        *harness.sessions.append_many(two.id, _events(BIG)),
    ]
    read = [*harness.sessions.events(one.id), *harness.sessions.events(two.id)]
    assert read == appended
    assert [cbor2.dumps(e.payload) for e in read] == [cbor2.dumps(e.payload) for e in appended], "byte for byte"
    # The file's text (in two results, nested twice, and as a write's content) and the zero bytes: one row each.
    assert [r["size"] for r in _rows(harness, "SELECT size FROM event_payloads ORDER BY size")] == [
        len(cbor2.dumps(b"\x00" * 5000)),
        len(cbor2.dumps(BIG)),
    ]
    stored = _rows(harness, "SELECT type, length(event_cbor) AS n FROM session_events ORDER BY session_id, seq")
    assert all(r["n"] < payloads.EXTERNAL_BYTES for r in stored if r["type"] == "tool_result")
    # A message stays whole (the search index scans messages itself), and so does an event no larger than the bound.
    assert [r["n"] > 5000 for r in stored if r["type"] == "message"] == [True, True]
    assert len(_rows(harness, "SELECT DISTINCT session_id, seq FROM event_payload_refs")) == 4


def test_repeated_reads_of_a_file_by_the_agent_add_one_stored_copy(harness: Harness) -> None:
    agent = harness.agent()
    sessions = [harness.sessions.create(harness.account_id, agent.id) for _ in range(2)]
    for session in sessions:
        ctx = _agent_context(harness, session.id)
        _, error = harness.invoke_sync(ctx, "write", {"address": "~/memory/big.txt", "content": BIG})
        assert error is None
        for _ in range(10):
            result, error = harness.invoke_sync(ctx, "read", {"address": "~/memory/big.txt"})
            assert error is None and result is not None and result.data["content"] == BIG
    assert _rows(harness, "SELECT COUNT(*) AS n FROM event_payloads")[0]["n"] == 1
    for session in sessions:
        results = [
            e
            for e in harness.sessions.events(session.id)
            if e.type == "tool_result" and e.payload.get("name") == "read"
        ]
        assert len(results) == 10 and all(e.payload["output"]["content"] == BIG for e in results)


def _whole_again(h: Harness) -> None:
    """Store every event whole, as before m012 split them, so a read can be compared with and without the split."""
    store = SessionStore(h.db)
    with h.db.transaction() as conn:
        for (session_id,) in conn.execute("SELECT id FROM sessions").fetchall():
            for event in store.events(session_id):
                conn.execute(
                    "UPDATE session_events SET event_cbor = ? WHERE session_id = ? AND seq = ?",
                    (cbor2.dumps(event.payload), session_id, event.seq),
                )
        conn.execute("DELETE FROM event_payload_refs")
        conn.execute("DELETE FROM event_payloads")


@pytest.mark.anyio
async def test_thread_and_run_reads_are_the_same_whether_values_are_split_or_whole(harness: Harness) -> None:
    agent = harness.agent()
    session = harness.sessions.create(harness.account_id, agent.id, title="big reads")
    harness.sessions.append_many(session.id, _events(BIG, binary=False))
    script = harness.runs.enqueue(account_id=harness.account_id, kind="workflow", title="script", origin="agent")
    harness.runs.append_journal(script.id, [{"callSeq": 1, "kind": "log", "level": "info", "message": BIG[:3000]}])
    harness.runs.finalize(script.id, Succeeded({"text": BIG[:2000]}))
    reads = [
        {"address": f"thread:{session.id}", "format": "json"},
        {"address": f"thread:{session.id}"},
        {"address": f"run:{script.id}", "format": "json"},
    ]
    assert _rows(harness, "SELECT COUNT(*) AS n FROM event_payloads")[0]["n"] == 1
    async with Client(build_server(harness), mode="legacy") as client:
        split = [await client.call_tool("read", r) for r in reads]
        _whole_again(harness)
        assert _rows(harness, "SELECT COUNT(*) AS n FROM event_payloads")[0]["n"] == 0
        whole = [await client.call_tool("read", r) for r in reads]
    assert [(r.structured_content, r.content) for r in split] == [(r.structured_content, r.content) for r in whole]
    # Sent once, in the text block (it is over 128 KiB): the JSON there carries the events, values put back.
    events = json.loads(split[0].content[0].text)["events"]  # pyright: ignore[reportAttributeAccessIssue]
    assert [e["output"]["content"] for e in events if e["type"] == "tool_result" and e["name"] == "read"] == [BIG]


def test_an_older_database_is_migrated_with_its_large_events_split_and_read_back_the_same(tmp_path: Path) -> None:
    conn = database_before(tmp_path / "old.db", "m012_event_payloads")
    logged: dict[str, list[dict[str, Any]]] = {}
    for session_id in ("s1", "s2"):
        conn.execute(
            "INSERT INTO sessions (id, account_id, agent_id, created_at, updated_at) VALUES (?, 'acct', 'agent', 0, 0)",
            (session_id,),
        )
        logged[session_id] = [{**payload, "actor": actor} for payload, actor in _events(BIG)]
        for seq, payload in enumerate(logged[session_id], start=1):
            conn.execute(
                "INSERT INTO session_events (session_id, seq, id, type, actor, event_cbor, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, f"{session_id}-{seq}", payload["type"], payload["actor"], cbor2.dumps(payload), seq),
            )
    conn.execute(
        "INSERT INTO runs (id, account_id, root_run_id, kind, origin, title, status, created_at, updated_at) "
        "VALUES ('r1', 'acct', 'r1', 'workflow', 'agent', 'script', 'succeeded', 0, 0)"
    )
    entry = {"callSeq": 1, "kind": "result", "key": "tool|read|{}", "status": "ok", "output": BIG}
    conn.execute(
        "INSERT INTO run_journal (run_id, seq, call_seq, kind, key, entry_cbor, created_at) VALUES "
        "('r1', 1, 1, 'result', ?, ?, 0)",
        (entry["key"], cbor2.dumps(entry, canonical=True)),
    )
    conn.execute("CREATE INDEX events_by_type ON session_events (type)")  # as a later migration might add
    assert migrate(conn)[0] == "m012_event_payloads"
    tables = {r[0]: r[1] for r in conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'")}
    assert "WITHOUT ROWID" not in tables["session_events"] and "WITHOUT ROWID" not in tables["run_journal"]
    assert conn.execute("SELECT COUNT(*) FROM sqlite_schema WHERE name = 'events_by_type'").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM event_payloads").fetchone()[0] == 2
    conn.close()
    db = Database(tmp_path / "old.db")
    try:
        sessions = SessionStore(db)
        for session_id, payloads_logged in logged.items():
            events = sessions.events(session_id)
            assert [e.payload for e in events] == payloads_logged
            assert [(e.seq, e.id, e.created_at) for e in events] == [(i, f"{session_id}-{i}", i) for i in range(1, 6)]
        assert RunStore(db).journal("r1") == [entry]
        appended = sessions.append("s1", {"type": "message", "role": "user", "content": "after"}, "user")
        assert appended.seq == 6
    finally:
        db.close()


def test_a_value_missing_from_a_damaged_database_is_a_storage_error(harness: Harness) -> None:
    session = harness.sessions.create(harness.account_id, harness.agent().id)
    harness.sessions.append_many(session.id, _events(BIG))
    with harness.db.transaction() as conn:
        conn.execute("DELETE FROM event_payloads")
    with pytest.raises(StorageError) as failed:
        harness.sessions.events(session.id)
    assert failed.value.message.startswith("A logged event names a stored value that is missing (")
    assert len(harness.sessions.events(session.id, last=1)) == 1, "events that name no missing value still read"
