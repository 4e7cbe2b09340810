"""The durable run store: queue, claims, parking, retries, cancellation, usage and the public run shape. Every test
runs on SQLite and on PostgreSQL (`any_db`, tests/store/pgkit.py)."""

from __future__ import annotations

import pytest

from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.runs import Canceled, Failed, Parked, Succeeded
from mcp_harness.runs.policy import retry_delay_ms
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database
from mcp_harness.store.runs import RunStore
from tests.runs.conftest import add, session, set_created


def test_enqueue_trims_the_title_and_refuses_a_blank_one(store: RunStore) -> None:
    run = add(store, "  Summarize the repo  ")
    assert (run.title, run.status, run.attempt, run.max_attempts, run.queue, run.input) == (
        "Summarize the repo",
        "queued",
        0,
        1,
        "background",
        {},
    )
    with pytest.raises(BadRequest):
        add(store, "   ")
    with pytest.raises(BadRequest):
        add(store, kind="script")


def test_a_child_inherits_the_root_and_sits_one_level_deeper(store: RunStore) -> None:
    parent = add(store)
    child = add(store, parent_run_id=parent.id, parent_tool_call_id="call-1")
    grandchild = add(store, parent_run_id=child.id)
    assert (parent.root_run_id, parent.depth) == (parent.id, 0)
    assert (child.root_run_id, child.depth, child.parent_tool_call_id) == (parent.id, 1, "call-1")
    assert (grandchild.root_run_id, grandchild.depth) == (parent.id, 2)
    assert [c.id for c in store.children(parent.id)] == [child.id]
    assert store.count_children(parent.id) == 1
    with pytest.raises(NotFound):
        add(store, parent_run_id="nope")


def test_enqueue_with_a_known_id_returns_the_existing_row(store: RunStore) -> None:
    first = add(store, "first", run_id="firing-1", input={"n": 1})
    again = add(store, "second", run_id="firing-1", input={"n": 2})
    assert again == first
    assert store.get("firing-1").input == {"n": 1}


def test_get_of_an_unknown_run_is_not_found(store: RunStore) -> None:
    assert store.find("nope") is None
    with pytest.raises(NotFound):
        store.get("nope")


def test_claim_sets_the_lease_and_counts_an_attempt(store: RunStore) -> None:
    run = add(store)
    before = now_ms()
    claimed = store.claim_next("me", kinds=["agent"], lease_ms=30_000)
    assert claimed is not None and claimed.id == run.id
    assert (claimed.status, claimed.lease_owner, claimed.attempt) == ("claimed", "me", 1)
    assert claimed.lease_expires_at is not None and before + 30_000 <= claimed.lease_expires_at <= now_ms() + 30_000
    running = store.mark_running(run.id)
    assert running is not None and running.status == "running" and running.started_at is not None
    assert store.claim_next("me", kinds=["agent"]) is None


def test_claim_takes_interactive_first_then_oldest(db: Database, store: RunStore) -> None:
    old = add(store, "old")
    new = add(store, "new")
    urgent = add(store, "urgent", queue="interactive")
    set_created(db, old.id, 1)
    set_created(db, new.id, 2)
    set_created(db, urgent.id, 3)
    order = [store.claim_next("me", kinds=["agent"]) for _ in range(3)]
    assert [r.title for r in order if r] == ["urgent", "old", "new"]


def test_claim_skips_other_kinds_future_work_and_busy_sessions(db: Database, store: RunStore) -> None:
    busy = session(db, "s-busy")
    later = add(store, "later")
    with db.transaction() as conn:
        conn.execute("UPDATE runs SET not_before = ? WHERE id = ?", (now_ms() + 60_000, later.id))
    first = add(store, "first turn", session_id=busy)
    assert store.claim_next("me", kinds=["agent"]) == store.get(first.id)
    add(store, "second turn", session_id=busy)
    workflow = add(store, "script", kind="workflow")
    assert store.claim_next("me", kinds=["agent"]) is None
    claimed = store.claim_next("me", kinds=["agent", "workflow"])
    assert claimed is not None and claimed.id == workflow.id
    assert store.next_due_at() == store.get(later.id).not_before


def test_claim_batch_claims_what_each_kind_allows_and_starts_it_in_one_transaction(
    db: Database, store: RunStore
) -> None:
    busy = session(db, "s-busy")
    runs = [add(store, f"r{i}") for i in range(3)]
    for i, run in enumerate(runs):
        set_created(db, run.id, i + 1)
    first, second = add(store, "first turn", session_id=busy), add(store, "second turn", session_id=busy)
    set_created(db, first.id, 10)
    set_created(db, second.id, 11)
    flow = add(store, "script", kind="workflow")
    claimed = store.claim_batch("me", {"agent": 3, "workflow": 5}, lease_ms=30_000, exclude={runs[0].id})
    # Oldest first, one turn per session, the excluded run left alone, every claim already running.
    assert [r.title for r in claimed] == ["r1", "r2", "first turn", "script"]
    assert all((r.status, r.lease_owner, r.attempt) == ("running", "me", 1) for r in claimed)
    assert all(r.started_at is not None and r == store.get(r.id) for r in claimed)
    assert store.get(runs[0].id).status == "queued" and store.get(second.id).status == "queued"
    assert claimed[-1].id == flow.id
    assert store.claim_batch("me", {"agent": 0, "workflow": 0}) == []


def test_queue_place_counts_live_runs_those_ahead_and_a_busy_session(db: Database, store: RunStore) -> None:
    busy = session(db, "s-busy")
    live = add(store, "live turn", session_id=busy)
    assert store.claim_next("me", kinds=["agent"]) is not None
    old, urgent, waiting = add(store, "old"), add(store, "urgent", queue="interactive"), add(store, session_id=busy)
    for i, run in enumerate((live, old, urgent, waiting)):
        set_created(db, run.id, i + 1)
    assert store.queue_place(store.get(waiting.id)) == (1, 2, True)  # interactive first, then older
    assert store.queue_place(store.get(old.id)) == (1, 1, False)
    assert store.queue_place(store.get(urgent.id)) == (1, 0, False)


def test_pending_reports_due_timers_due_queued_work_and_the_next_due_time(store: RunStore) -> None:
    assert store.pending() == (False, False, None)
    later = store.park(add(store).id, {"reason": "timer", "wakeAt": now_ms() + 60_000})
    assert store.pending() == (False, False, later.not_before)
    add(store)
    assert store.pending() == (False, True, later.not_before)
    due = store.park(add(store).id, {"reason": "timer", "wakeAt": now_ms() - 1})
    assert store.pending() == (True, True, due.not_before)


def test_after_commit_runs_once_the_outermost_transaction_commits(db: Database) -> None:
    seen: list[str] = []
    with db.transaction():
        with db.transaction():
            db.after_commit(lambda: seen.append("kept by a released savepoint"))
        with pytest.raises(ValueError), db.transaction():
            db.after_commit(lambda: seen.append("rolled back savepoint"))
            raise ValueError
        with pytest.raises(ValueError), db.transaction():  # a sibling savepoint's rollback drops only its own
            raise ValueError
        with pytest.raises(ValueError), db.transaction():  # a released savepoint falls with the one around it
            db.after_commit(lambda: seen.append("in a savepoint that rolls back"))
            with db.transaction():
                db.after_commit(lambda: seen.append("released inside a savepoint that rolls back"))
            raise ValueError
        with db.transaction():
            with db.transaction():
                db.after_commit(lambda: seen.append("two levels down, both released"))
            with pytest.raises(ValueError), db.transaction():
                raise ValueError
        db.after_commit(lambda: seen.append("outer"))
        assert seen == []
    assert seen == ["kept by a released savepoint", "two levels down, both released", "outer"]
    with pytest.raises(ValueError), db.transaction():
        db.after_commit(lambda: seen.append("rolled back transaction"))
        raise ValueError
    db.after_commit(lambda: seen.append("no transaction: at once"))
    assert seen == [
        "kept by a released savepoint",
        "two levels down, both released",
        "outer",
        "no transaction: at once",
    ]


def test_boot_sweep_requeues_claimed_and_running_runs_keeping_the_attempt(store: RunStore) -> None:
    a, b, c = add(store), add(store), add(store)
    for _ in range(3):
        store.claim_next("me", kinds=["agent"])
    store.mark_running(a.id)
    store.finalize(c.id, Succeeded())
    assert sorted(store.sweep_at_boot()) == sorted([a.id, b.id])
    for run in (store.get(a.id), store.get(b.id)):
        assert (run.status, run.lease_owner, run.lease_expires_at, run.attempt) == ("queued", None, None, 1)
    assert store.get(c.id).status == "succeeded"


def test_park_records_the_wait_and_requeue_clears_it(store: RunStore) -> None:
    run = add(store)
    store.claim_next("me", kinds=["agent"])
    parked = store.park(run.id, {"reason": "children", "toolCallIds": ["a", "b"]})
    assert (parked.status, parked.lease_owner, parked.not_before) == ("waiting", None, None)
    assert parked.wait == {"reason": "children", "toolCallIds": ["a", "b"]}
    assert [r.id for r in store.waiting_on_children()] == [run.id]
    assert store.requeue(run.id) is True
    again = store.get(run.id)
    assert (again.status, again.wait) == ("queued", None)
    assert store.requeue(run.id) is False


def test_timed_waits_set_not_before_and_wake_when_due(store: RunStore) -> None:
    timer, event, future = add(store), add(store), add(store)
    now = now_ms()
    assert store.park(timer.id, {"reason": "timer", "wakeAt": now - 1}).not_before == now - 1
    assert (
        store.park(event.id, {"reason": "event", "waitId": "w", "timeoutAt": now + 60_000}).not_before == now + 60_000
    )
    assert store.park(future.id, {"reason": "budget-pause"}).not_before is None
    assert store.wake_due() == [timer.id]
    assert store.get(timer.id).status == "queued"
    assert store.get(event.id).status == "waiting"


def test_finalize_discards_outcomes_for_terminal_rows(store: RunStore) -> None:
    run = add(store)
    store.claim_next("me", kinds=["agent"])
    assert store.cancel_tree(run.id) == ([], [run.id])
    assert store.settle(run.id, Canceled()) == (store.get(run.id), True)
    after, committed = store.settle(run.id, Succeeded("late"))
    assert (after.status, after.output, committed) == ("canceled", None, False)
    assert store.park(run.id, {"reason": "timer", "wakeAt": 1}).status == "canceled"


def test_a_parked_outcome_leaves_a_row_the_executor_already_parked_and_a_child_requeued(store: RunStore) -> None:
    run = add(store)
    store.claim_next("me", kinds=["agent"])
    store.mark_running(run.id)
    store.park(run.id, {"reason": "children", "toolCallIds": ["a"]})
    store.requeue(run.id)
    after, committed = store.settle(run.id, Parked({"reason": "children", "toolCallIds": ["a"]}))
    assert (after.status, committed) == ("queued", False)


def test_a_retryable_failure_is_queued_again_with_backoff_until_attempts_run_out(store: RunStore) -> None:
    run = add(store, max_attempts=2)
    store.claim_next("me", kinds=["agent"])
    before = now_ms()
    failure = Failed(code="provider-error", message="503", retryable=True, http_status=503, detail={"tool": "x"})
    retried, committed = store.settle(run.id, failure, retry_base_ms=10_000)
    assert (retried.status, committed, retried.lease_owner) == ("queued", False, None)
    error = {"code": "provider-error", "message": "503", "retryable": True, "httpStatus": 503, "tool": "x"}
    assert retried.error == error
    assert retried.not_before is not None and before + 10_000 <= retried.not_before <= now_ms() + 11_000
    assert store.claim_next("me", kinds=["agent"]) is None
    with store.db.transaction() as conn:
        conn.execute("UPDATE runs SET not_before = 0 WHERE id = ?", (run.id,))
    assert store.claim_next("me", kinds=["agent"]) is not None
    failed, committed = store.settle(run.id, failure)
    assert (failed.status, failed.attempt, committed, failed.error) == ("failed", 2, True, error)
    assert failed.finished_at is not None


def test_retry_backoff_doubles_up_to_the_cap() -> None:
    assert 5_000 <= retry_delay_ms(1) < 6_000
    assert 10_000 <= retry_delay_ms(2) < 11_000
    assert 300_000 <= retry_delay_ms(12) < 301_000
    assert 40 <= retry_delay_ms(3, base_ms=10, cap_ms=1_000) < 50


def test_usage_accumulates_and_rolls_up_through_the_tree(store: RunStore) -> None:
    parent = add(store)
    child = add(store, parent_run_id=parent.id)
    grandchild = add(store, parent_run_id=child.id)
    sibling = add(store, parent_run_id=parent.id)
    store.add_usage(parent.id, {"input": 10, "output": 5, "total": 15})
    store.add_usage(parent.id, {"input": 1, "output": 1, "cacheRead": 7, "total": 2})
    store.add_usage(grandchild.id, {"input": 100, "output": 10})
    store.add_usage(child.id, {"input": 20, "output": 2, "total": 22})
    store.finalize(grandchild.id, Succeeded())
    assert store.get(child.id).usage == {
        "input": 20,
        "output": 2,
        "cacheRead": 0,
        "cacheWrite": 0,
        "total": 22,
        "children": {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "total": 110, "runs": 1},
    }
    store.finalize(child.id, Failed(code="x", message="y"))
    store.finalize(sibling.id, Succeeded())
    assert store.get(parent.id).usage == {
        "input": 11,
        "output": 6,
        "cacheRead": 7,
        "cacheWrite": 0,
        "total": 17,
        "children": {"input": 120, "output": 12, "cacheRead": 0, "cacheWrite": 0, "total": 132, "runs": 2},
    }


def test_usage_reported_after_a_terminal_commit_still_reaches_every_ancestor(store: RunStore) -> None:
    parent = add(store)
    child = add(store, parent_run_id=parent.id)
    grandchild = add(store, parent_run_id=child.id)
    store.finalize(grandchild.id, Canceled())
    store.finalize(child.id, Canceled())
    store.add_usage(grandchild.id, {"input": 3, "output": 4})
    assert store.get(child.id).usage == {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "total": 0,
        "children": {"input": 3, "output": 4, "cacheRead": 0, "cacheWrite": 0, "total": 7, "runs": 1},
    }
    parent_usage = store.get(parent.id).usage
    assert parent_usage is not None and parent_usage["children"]["total"] == 7
    assert parent_usage["children"]["runs"] == 1


def test_cancel_tree_cancels_queued_and_waiting_members_and_reports_executing_ones(store: RunStore) -> None:
    parent = add(store)
    queued = add(store, parent_run_id=parent.id)
    waiting = add(store, parent_run_id=parent.id)
    running = add(store, parent_run_id=parent.id)
    done = add(store, parent_run_id=parent.id)
    deep = add(store, parent_run_id=done.id)
    store.park(parent.id, {"reason": "children", "toolCallIds": ["q", "w", "r"]})
    store.park(waiting.id, {"reason": "event", "waitId": "w"})
    with store.db.transaction() as conn:
        conn.execute("UPDATE runs SET status = 'running' WHERE id = ?", (running.id,))
    store.finalize(done.id, Succeeded())
    canceled, live = store.cancel_tree(parent.id)
    assert sorted(canceled) == sorted([parent.id, queued.id, waiting.id, deep.id])
    assert canceled[-1] == parent.id  # deepest first
    assert live == [running.id]
    assert [store.get(r).status for r in (parent.id, queued.id, waiting.id, done.id)] == [
        "canceled",
        "canceled",
        "canceled",
        "succeeded",
    ]
    assert store.get(parent.id).wait is None
    with pytest.raises(NotFound):
        store.cancel_tree("nope")


def test_live_on_session_lists_unfinished_runs(db: Database, store: RunStore) -> None:
    sid = session(db, "s1")
    a = add(store, session_id=sid)
    b = add(store, session_id=sid)
    add(store)
    store.finalize(a.id, Succeeded())
    assert [r.id for r in store.live_on_session(sid)] == [b.id]


def test_to_info_is_the_public_run_shape(db: Database, store: RunStore) -> None:
    sid = session(db, "s1")
    parent = add(store, "Parent", session_id=sid, agent_id="agent", queue="interactive", max_attempts=3)
    store.claim_next("me", kinds=["agent"])
    store.mark_running(parent.id)
    store.add_usage(parent.id, {"input": 2, "output": 3, "total": 5})
    store.set_plan(parent.id, {"steps": []})
    waiting = store.park(parent.id, {"reason": "children", "toolCallIds": ["a", "b"]})
    info = waiting.to_info()
    assert info == {
        "id": parent.id,
        "kind": "agent",
        "status": "waiting",
        "title": "Parent",
        "origin": "user",
        "agentId": "agent",
        "sessionId": sid,
        "rootRunId": parent.id,
        "depth": 0,
        "attempt": 1,
        "maxAttempts": 3,
        "queue": "interactive",
        "createdAt": parent.created_at,
        "startedAt": waiting.started_at,
        "wait": {"reason": "children", "pendingChildren": 2},
        "usage": {"input": 2, "output": 3, "cacheRead": 0, "cacheWrite": 0, "total": 5},
        "plan": {"steps": []},
    }
    child = add(store, "Child", parent_run_id=parent.id, origin="agent")
    failed = store.finalize(
        child.id, Failed(code="obligations", message="unmet", detail={"unmetObligations": [{"kind": "plan"}]})
    )
    child_info = failed.to_info()
    assert child_info["parentRunId"] == parent.id
    assert child_info["error"] == {"code": "obligations", "message": "unmet", "unmetObligations": [{"kind": "plan"}]}
    assert child_info["unmetObligations"] == [{"kind": "plan"}]
    assert child_info["finishedAt"] == failed.finished_at
    timer = store.park(add(store).id, {"reason": "event", "waitId": "w", "timeoutAt": 99, "label": "approval"})
    assert timer.to_info()["wait"] == {"reason": "event", "wakeAt": 99, "label": "approval"}
