"""`mcp-harness gc`'s pruning (store/retention.py) on a real database with real runs: what it takes, and what it never
touches — an unfinished run's session or journal, a call still owed its result, a session's last N events."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcp_harness.harness import Harness
from mcp_harness.runs import Succeeded
from mcp_harness.store._util import now_ms
from mcp_harness.store.retention import Retention, collect
from mcp_harness.store.sessions import Actor

DAY = 86_400_000
BIG = "".join(f"row {i:05d} of a big result\n" for i in range(5000))


def _later() -> int:
    """A `now` a year ahead: everything logged in the test is old by then."""
    return now_ms() + 365 * DAY


def _policy(*, age: int | None = 0, size: int | None = None, keep: int = 10) -> Retention:
    return Retention(max_age_ms=age, max_bytes=size, keep_last=keep)


def _history(h: Harness, session_id: str, pairs: int, *, big: bool = False, distinct: bool = False) -> None:
    """Answered `read` calls, with a user message before every fifth; `big` results share one large value,
    `distinct` ones each have their own."""
    events: list[tuple[dict[str, Any], Actor]] = []
    for i in range(pairs):
        if i % 5 == 0:
            events.append(({"type": "message", "role": "user", "content": f"note number {i} about zebras"}, "user"))
        events.append(({"type": "tool_call", "id": f"c{i}", "name": "read", "input": {"address": f"~/m/{i}"}}, "agent"))
        content = f"{BIG}{i}" if distinct else BIG if big else f"text {i}"
        output = {"summary": "ok", "content": content}
        events.append(({"type": "tool_result", "toolCallId": f"c{i}", "name": "read", "output": output}, "agent"))
    h.sessions.append_many(session_id, events)


def _seqs(h: Harness, session_id: str) -> list[int]:
    return [e.seq for e in h.sessions.events(session_id)]


def _count(h: Harness, sql: str, args: tuple[Any, ...] = ()) -> int:
    with h.db.reading() as conn:
        return int(conn.execute(sql, args).fetchone()[0])


@pytest.fixture
def session_id(harness: Harness) -> str:
    return harness.sessions.create(harness.account_id, harness.agent().id).id


def test_old_events_go_but_each_session_keeps_its_last_n_and_its_numbering(harness: Harness, session_id: str) -> None:
    _history(harness, session_id, 100)  # 220 events: 20 messages
    report = collect(harness.db, _policy(keep=30), now=_later())
    assert (report.pruned.events, report.pruned.sessions) == (190, 1)
    assert _seqs(harness, session_id) == list(range(191, 221))
    assert harness.sessions.append(session_id, {"type": "message", "role": "user", "content": "x"}, "user").seq == 221
    # Pruned messages leave the search index; kept ones are still found.
    kept = next(e.payload["content"] for e in harness.sessions.events(session_id) if e.type == "message")
    assert harness.sessions.search(harness.account_id, kept, agent_id=None, limit=5)
    assert not harness.sessions.search(harness.account_id, "note number 5 about", agent_id=None, limit=5)
    assert _count(harness, "SELECT COUNT(*) FROM message_search") == 3  # the two kept notes, and "x"


def test_events_younger_than_the_age_stay(harness: Harness, session_id: str) -> None:
    _history(harness, session_id, 20)
    assert collect(harness.db, _policy(age=30 * DAY, keep=1)).pruned.events == 0
    assert collect(harness.db, _policy(age=None, keep=1), now=_later()).pruned.events == 0, "no limit: nothing goes"
    assert len(_seqs(harness, session_id)) == 44


def test_a_call_still_owed_a_result_keeps_its_call_and_everything_after(harness: Harness, session_id: str) -> None:
    _history(harness, session_id, 10)  # seqs 1..22
    owed = harness.sessions.append(
        session_id, {"type": "tool_call", "id": "owed", "name": "delegate", "input": {}}, "agent"
    )
    _history(harness, session_id, 10)  # seqs 24..45
    collect(harness.db, _policy(keep=1), now=_later())
    assert _seqs(harness, session_id) == list(range(owed.seq, 46))
    assert [c.call_id for c in harness.sessions.open_calls(session_id)] == ["owed"]


@pytest.mark.anyio
async def test_an_unfinished_runs_session_and_journal_are_never_touched(scripted: Harness) -> None:
    h = scripted
    agent = h.agent()
    finished, queued = (h.sessions.create(h.account_id, agent.id) for _ in range(2))
    for session in (finished, queued):
        _history(h, session.id, 30)
        h.sessions.append(session.id, {"type": "message", "role": "user", "content": "hello"}, "user")
    done = h.runs.enqueue(
        account_id=h.account_id, title="turn", origin="user", agent_id=agent.id, session_id=finished.id
    )
    async with h.engine_running():
        with anyio.fail_after(30):
            assert (await h.engine.wait_for(done.id)).status == "succeeded"
    waiting = h.runs.enqueue(
        account_id=h.account_id, title="turn", origin="user", agent_id=agent.id, session_id=queued.id
    )
    # Script journals: a finished tree's goes; a finished child's under an unfinished root stays.
    old_tree = h.runs.enqueue(account_id=h.account_id, kind="workflow", title="done", origin="agent")
    root = h.runs.enqueue(account_id=h.account_id, kind="workflow", title="root", origin="agent")
    child = h.runs.enqueue(
        account_id=h.account_id, kind="workflow", title="c", origin="workflow", parent_run_id=root.id
    )
    entry = {"callSeq": 1, "kind": "log", "level": "info", "message": "hi"}
    for run in (old_tree, root, child):
        h.runs.append_journal(run.id, [entry, {**entry, "callSeq": 2}])
    h.runs.finalize(old_tree.id, Succeeded())
    h.runs.finalize(child.id, Succeeded())
    before = _seqs(h, queued.id)
    report = collect(h.db, _policy(keep=5), now=_later())
    assert _seqs(h, queued.id) == before and len(before) == 67
    assert len(_seqs(h, finished.id)) == 5
    assert (report.pruned.sessions, report.pruned.live_sessions) == (1, 1)
    assert (report.pruned.journals, report.pruned.journal_entries) == (1, 2)
    assert [len(h.runs.journal(r.id)) for r in (old_tree, root, child)] == [0, 2, 2]
    assert h.runs.get(waiting.id).status == "queued"


def test_a_size_limit_takes_the_oldest_until_the_log_fits(harness: Harness, session_id: str) -> None:
    _history(harness, session_id, 200)
    with harness.db.transaction() as conn:  # one append_many stamps one time; the size rule cuts by time
        conn.execute("UPDATE session_events SET created_at = seq")

    def log_bytes() -> int:
        return _count(harness, "SELECT SUM(length(event_cbor)) FROM session_events")

    total = log_bytes()
    report = collect(harness.db, _policy(age=None, size=total // 2, keep=10))
    assert log_bytes() <= total // 2 < log_bytes() + 200, "about as much as needed went, no more"
    seqs = _seqs(harness, session_id)
    assert seqs == list(range(seqs[0], 441)) and report.pruned.events == seqs[0] - 1
    assert collect(harness.db, _policy(age=None, size=1, keep=10)).pruned.events == len(seqs) - 10


def test_a_stored_value_goes_when_no_event_uses_it(harness: Harness, session_id: str) -> None:
    other = harness.sessions.create(harness.account_id, harness.agent().id).id
    _history(harness, session_id, 3, big=True)
    _history(harness, other, 3, big=True)
    harness.sessions.append(session_id, {"type": "message", "role": "user", "content": "newer"}, "user")
    assert _count(harness, "SELECT COUNT(*) FROM event_payloads") == 1
    # Both sessions lose their copies but the other's last event, its big result: the value stays.
    report = collect(harness.db, _policy(keep=1), now=_later())
    assert (report.pruned.events, report.pruned.payloads) == (13, 0)
    (last,) = harness.sessions.events(other)
    assert last.payload["output"]["content"] == BIG
    harness.sessions.append(other, {"type": "message", "role": "user", "content": "newest"}, "user")
    report = collect(harness.db, _policy(keep=1), now=_later())
    assert (report.pruned.events, report.pruned.payloads, report.pruned.payload_bytes > len(BIG)) == (1, 1, True)
    assert _count(harness, "SELECT COUNT(*) FROM event_payloads") == 0


def _snapshot(h: Harness) -> list[Any]:
    with h.db.reading() as conn:
        return [
            [tuple(r) for r in conn.execute(f"SELECT * FROM {table}").fetchall()]
            for table in ("session_events", "event_payloads", "event_payload_refs", "run_journal", "message_search")
        ]


def test_a_dry_run_reports_what_gc_then_does_and_changes_nothing(harness: Harness, session_id: str) -> None:
    _history(harness, session_id, 40, big=True)
    harness.sessions.append(session_id, {"type": "message", "role": "user", "content": "last"}, "user")
    before = _snapshot(harness)
    now = _later()
    dry = collect(harness.db, _policy(keep=1), now=now, dry_run=True)
    assert _snapshot(harness) == before and dry.vacuum == "none"
    assert dry.file_bytes_after == dry.file_bytes_before
    real = collect(harness.db, _policy(keep=1), now=now)
    assert dry.pruned == real.pruned and real.pruned.payloads == 1 and real.pruned.events == 88
    assert dry.to_json()["events"] == {
        "pruned": 88,
        "bytes": real.pruned.event_bytes,
        "sessions": 1,
        "liveSessionsKept": 0,
    }


def test_the_first_gc_turns_on_incremental_vacuum_and_later_ones_use_it(harness: Harness, session_id: str) -> None:
    _history(harness, session_id, 50, distinct=True)
    statements: list[str] = []
    with harness.db.reading() as conn:
        assert conn.execute("PRAGMA temp_store").fetchone()[0] == 2  # savepoint journals in memory (store/db.py)
        conn.set_trace_callback(statements.append)
    try:
        first = collect(harness.db, _policy(keep=1), now=_later())
    finally:
        with harness.db.reading() as conn:
            conn.set_trace_callback(None)
    assert first.vacuum == "full" and first.file_bytes_after < first.file_bytes_before
    # The full VACUUM copies the database through temporary storage: on disk, not in memory; memory again after.
    at = statements.index("VACUUM")
    assert statements[at - 1] == "PRAGMA temp_store=FILE" and statements[at + 1] == "PRAGMA temp_store=MEMORY"
    with harness.db.reading() as conn:
        assert conn.execute("PRAGMA temp_store").fetchone()[0] == 2
    _history(harness, session_id, 50, distinct=True)
    second = collect(harness.db, _policy(keep=1), now=_later())
    assert second.vacuum == "incremental"
    with harness.db.reading() as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
