"""The fan-out's lighter writes hold the same contracts: a terminal commit carries the last reply's usage (rolled up
once), appends inside a caller's transaction and multi-event appends number and track events as single appends do,
and index rows staged during a group commit (`search.staged`) reach thread search with their events — or, rolled
back with them, never. Real SQLite."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.harness import Harness
from mcp_harness.runs import Canceled, Parked, Succeeded
from mcp_harness.store import search
from mcp_harness.store.sessions import Actor, NewSession


def _tree(h: Harness) -> tuple[str, str]:
    parent = h.runs.enqueue(account_id=h.account_id, title="parent", origin="agent")
    child = h.runs.enqueue(account_id=h.account_id, title="child", origin="agent", parent_run_id=parent.id)
    return parent.id, child.id


def test_a_terminal_settle_carries_the_usage_and_rolls_it_up_once(harness: Harness) -> None:
    h = harness
    parent, child = _tree(h)
    h.runs.add_usage(child, {"input": 1, "output": 1})
    record, done = h.runs.settle(child, Succeeded("ok"), usage={"input": 10, "output": 5})
    assert done and record.status == "succeeded"
    assert (record.usage or {})["input"] == 11 and (record.usage or {})["total"] == 17
    children = (h.runs.get(parent).usage or {})["children"]
    assert (children["input"], children["output"], children["runs"]) == (11, 6, 1)


def test_usage_given_with_an_outcome_that_writes_no_terminal_row_is_still_added(harness: Harness) -> None:
    h = harness
    parent, child = _tree(h)
    h.runs.claim_next("me", kinds=["agent"])  # the parent (older) first
    h.runs.claim_next("me", kinds=["agent"])
    parked, done = h.runs.settle(child, Parked({"reason": "children", "toolCallIds": ["c"]}), usage={"input": 3})
    assert not done and parked.status == "waiting" and (parked.usage or {})["input"] == 3
    h.runs.cancel_tree(child)
    after, done = h.runs.settle(child, Succeeded("late"), usage={"output": 4})
    assert not done and after.status == "canceled" and (after.usage or {})["output"] == 4
    # The late tokens still reach the parent's children block, as `add_usage` on a terminal run adds them.
    assert (h.runs.get(parent).usage or {})["children"]["output"] == 4
    record, done = h.runs.settle(parent, Canceled(), usage={"input": 2})
    assert done and (record.usage or {})["input"] == 2


def test_append_within_needs_a_transaction_and_appends_as_append_does(harness: Harness) -> None:
    h = harness
    session = h.sessions.create(h.account_id, h.agent().id).id
    with h.db.reading() as conn, pytest.raises(RuntimeError, match="open transaction"):
        h.sessions.append_within(conn, session, {"type": "message", "role": "user", "content": "x"}, "user")
    h.sessions.append(session, {"type": "message", "role": "user", "content": "first"}, "user")
    with h.db.transaction() as conn:
        call = {"type": "tool_call", "id": "c1", "name": "read", "input": {}}
        record = h.sessions.append_within(conn, session, call, "agent")
    assert record.seq == 2
    assert [c.call_id for c in h.sessions.open_calls(session)] == ["c1"]


def test_several_events_are_numbered_after_the_last_and_tracked_as_one_by_one(harness: Harness) -> None:
    h = harness
    session = h.sessions.create(h.account_id, h.agent().id).id
    h.sessions.append(session, {"type": "message", "role": "user", "content": "start"}, "user")
    big = "y" * 10_000  # moved out of the event row (`store/payloads.py`) and put back on read
    events = [
        ({"type": "tool_call", "id": "a", "name": "read", "input": {"address": big}}, "agent"),
        ({"type": "tool_call", "id": "b", "name": "read", "input": {}}, "agent"),
        ({"type": "tool_result", "toolCallId": "a", "name": "read", "output": {"text": big}}, "agent"),
        ({"type": "message", "role": "assistant", "content": "Reading the zebra notes"}, "agent"),
    ]
    records = h.sessions.append_many(session, events)  # pyright: ignore[reportArgumentType]
    assert [r.seq for r in records] == [2, 3, 4, 5]
    stored = h.sessions.events(session)
    assert [e.seq for e in stored] == [1, 2, 3, 4, 5]
    assert stored[1].payload["input"]["address"] == big and stored[3].payload["output"]["text"] == big
    assert [c.call_id for c in h.sessions.open_calls(session)] == ["b"]
    [(found, snippet)] = h.sessions.search(h.account_id, "zebra", agent_id=None, limit=5)
    assert found.id == session and snippet == "Reading the zebra notes"


def test_appends_across_sessions_number_each_after_its_own_last_and_touch_each(harness: Harness) -> None:
    h = harness
    agent = h.agent().id
    a, b, fresh = (h.sessions.create(h.account_id, agent).id for _ in range(3))
    one: tuple[dict[str, Any], Actor] = ({"type": "message", "role": "user", "content": "one"}, "user")
    h.sessions.append_many(a, [one, one])
    h.sessions.append(b, {"type": "message", "role": "user", "content": "one"}, "user")
    with h.db.transaction() as conn:  # so the append's touch shows
        conn.execute("UPDATE sessions SET updated_at = 0")
    with h.db.reading() as conn, pytest.raises(RuntimeError, match="open transaction"):
        h.sessions.append_across_within(conn, [(a, [])])
    call: dict[str, Any] = {"type": "tool_call", "id": "c1", "name": "read", "input": {}}
    reply: dict[str, Any] = {"type": "message", "role": "assistant", "content": "The narwhal answer"}
    with h.db.transaction() as conn:
        made = h.sessions.append_across_within(
            conn,
            [
                (a, [(reply, "agent")]),
                (b, [(call, "agent"), (reply, "agent")]),
                (fresh, [(reply, "agent")]),
                (a, [(reply, "agent")]),
            ],  # fmt: skip
        )
    assert [[r.seq for r in records] for records in made] == [[3], [2, 3], [1], [4]]
    assert [e.seq for e in h.sessions.events(a)] == [1, 2, 3, 4]
    assert [c.call_id for c in h.sessions.open_calls(b)] == ["c1"]
    assert [h.sessions.get(s).updated_at for s in (a, b, fresh)] == [
        h.sessions.events(s)[-1].created_at for s in (a, b, fresh)
    ]
    found = h.sessions.search(h.account_id, "narwhal", agent_id=None, limit=5)
    assert sorted(s.id for s, _ in found) == sorted([a, b, fresh])


def test_children_created_together_are_found_by_title_and_by_brief(harness: Harness) -> None:
    h = harness
    agent = h.agent().id
    new = [
        NewSession(
            id=f"child-{i}",
            agent_id=agent,
            kind="child",
            title=f"Leaf number {i}",
            events=[({"type": "message", "role": "user", "content": f"Brief about walrus {i}"}, "agent")],
        )
        for i in range(3)
    ]
    h.sessions.create_many(h.account_id, new)
    titled = h.sessions.search(h.account_id, "leaf number 1", agent_id=None, limit=5)
    assert [s.id for s, _ in titled] == ["child-1"]
    briefed = h.sessions.search(h.account_id, "walrus", agent_id=None, limit=5)
    assert sorted(s.id for s, _ in briefed) == ["child-0", "child-1", "child-2"]


def test_staged_index_rows_land_with_the_commit_and_roll_back_with_their_savepoint(harness: Harness) -> None:
    h = harness
    session = h.sessions.create(h.account_id, h.agent().id).id

    def say(text: str) -> None:
        h.sessions.append(session, {"type": "message", "role": "user", "content": text}, "user")

    with h.db.transaction() as conn, search.staged(conn):
        say("the heron came first")
        try:
            with h.db.transaction():  # a call of the group that fails: its savepoint rolls back
                say("the osprey never was")
                raise RuntimeError("this call fails")
        except RuntimeError:
            pass
        # A search inside the staged transaction sees what it wrote.
        assert [s.id for s, _ in h.sessions.search(h.account_id, "heron", agent_id=None, limit=5)] == [session]
        say("the egret came later")
    for word, hits in (("heron", [session]), ("egret", [session]), ("osprey", [])):
        assert [s.id for s, _ in h.sessions.search(h.account_id, word, agent_id=None, limit=5)] == hits
    with h.db.reading() as conn:
        assert conn.execute("SELECT COUNT(*) FROM message_search WHERE session_id = ?", (session,)).fetchone()[0] == 2

    with pytest.raises(RuntimeError), h.db.transaction() as conn, search.staged(conn):
        say("the crane rolled back")
        raise RuntimeError("the whole group fails")
    assert h.sessions.search(h.account_id, "crane", agent_id=None, limit=5) == []
    say("the stork after it")  # outside a group: straight into the index, as before
    assert [s.id for s, _ in h.sessions.search(h.account_id, "stork", agent_id=None, limit=5)] == [session]


def test_open_calls_across_sessions_change_as_each_session_alone_would_in_one_statement_each(harness: Harness) -> None:
    h = harness
    agent = h.agent().id
    opening, closing, both, twice = (h.sessions.create(h.account_id, agent).id for _ in range(4))

    def call(call_id: str) -> tuple[dict[str, Any], Actor]:
        return {"type": "tool_call", "id": call_id, "name": "delegate", "input": {}}, "agent"

    def result(call_id: str) -> tuple[dict[str, Any], Actor]:
        return {"type": "tool_result", "toolCallId": call_id, "name": "delegate", "output": {}}, "system"

    # The same call ids in every session (a scripted model's are): closing one session's must leave the others'.
    for session in (closing, both):
        h.sessions.append_many(session, [call("call-1"), call("call-2")])
    statements: list[str] = []
    h.db._conn.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]
    try:
        with h.db.transaction() as conn:
            h.sessions.append_across_within(
                conn,
                [
                    (opening, [call("call-1"), call("call-2")]),
                    (closing, [result("call-1"), result("call-2")]),
                    (both, [result("call-1"), call("call-3"), call("call-4"), result("call-4")]),
                    (twice, [call("call-1")]),
                    (twice, [result("call-1"), call("call-2")]),
                ],  # fmt: skip
            )
    finally:
        h.db._conn.set_trace_callback(None)  # pyright: ignore[reportPrivateUsage]
    still_open = {s: [c.call_id for c in h.sessions.open_calls(s)] for s in (opening, closing, both, twice)}
    assert still_open == {
        opening: ["call-1", "call-2"],
        closing: [],
        both: ["call-2", "call-3"],  # call-4 was answered in the same append: never open
        twice: ["call-2"],  # its two entries are one append: call-1 opened and closed there
    }
    # `opening` and `closing` change in one insert and one delete together; `both` (close, open, close) and `twice`
    # (close, open) both open and close, so each makes its own in its log's order.
    inserts = [s for s in statements if s.startswith("INSERT INTO open_calls")]
    deletes = [s for s in statements if s.startswith("DELETE FROM open_calls")]
    assert (len(inserts), len(deletes)) == (1 + 1 + 1, 1 + 2 + 1)
