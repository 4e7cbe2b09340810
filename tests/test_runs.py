"""Runs: the durable store (queue, claims, parking, retries, cancellation, usage) and the engine that executes them."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import cbor2
import pytest

from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.runs import Canceled, Failed, Outcome, Parked, RunEngine, RunRecord, Succeeded
from mcp_harness.runs.policy import retry_delay_ms
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database
from mcp_harness.store.runs import RunStore

ACCOUNT = "acct"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "h.db")
    with database.transaction() as conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (?, 'tester', 0)", (ACCOUNT,))
        conn.execute(
            "INSERT INTO agents (id, account_id, name, definition_cbor, state_dir, created_at, updated_at) "
            "VALUES ('agent', ?, 'tester', ?, '/nonexistent', 0, 0)",
            (ACCOUNT, cbor2.dumps({})),
        )
    yield database
    database.close()


@pytest.fixture
def store(db: Database) -> RunStore:
    return RunStore(db)


def session(db: Database, session_id: str) -> str:
    with db.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO sessions (id, account_id, agent_id, created_at, updated_at) "
            "VALUES (?, ?, 'agent', 0, 0)",
            (session_id, ACCOUNT),
        )
    return session_id


def add(store: RunStore, title: str = "task", **kwargs: Any) -> RunRecord:
    kwargs.setdefault("origin", "user")
    return store.enqueue(account_id=ACCOUNT, title=title, **kwargs)


def set_created(db: Database, run_id: str, created_at: int) -> None:
    with db.transaction() as conn:
        conn.execute("UPDATE runs SET created_at = ? WHERE id = ?", (created_at, run_id))


@asynccontextmanager
async def serving(engine: RunEngine) -> AsyncIterator[RunEngine]:
    async with anyio.create_task_group() as tg:
        await tg.start(engine.serve)
        try:
            yield engine
        finally:
            tg.cancel_scope.cancel()


def recorder(engine: RunEngine) -> list[tuple[str, str]]:
    """Record every finalize hook call as (run id, status)."""
    seen: list[tuple[str, str]] = []

    async def hook(run: RunRecord) -> None:
        seen.append((run.id, run.status))

    engine.on_finalized.append(hook)
    return seen


class Fake:
    """A fake executor: runs `behave` (default: succeed), recording calls and how many ran at once."""

    def __init__(self, behave: Callable[[RunRecord], Awaitable[Outcome]] | None = None) -> None:
        self.behave = behave
        self.calls: list[RunRecord] = []
        self.active: set[str] = set()
        self.peak = 0

    async def __call__(self, run: RunRecord) -> Outcome:
        self.calls.append(run)
        self.active.add(run.id)
        self.peak = max(self.peak, len(self.active))
        try:
            if self.behave is None:
                return Succeeded({"ran": run.id})
            return await self.behave(run)
        finally:
            self.active.discard(run.id)


# -- the store --------------------------------------------------------------------------------------------------


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
        db.after_commit(lambda: seen.append("outer"))
        assert seen == []
    assert seen == ["kept by a released savepoint", "outer"]
    with pytest.raises(ValueError), db.transaction():
        db.after_commit(lambda: seen.append("rolled back transaction"))
        raise ValueError
    db.after_commit(lambda: seen.append("no transaction: at once"))
    assert seen == ["kept by a released savepoint", "outer", "no transaction: at once"]


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


# -- the engine -------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_enqueued_run_executes_once_and_wait_for_sees_it_finish(store: RunStore) -> None:
    fake = Fake()
    engine = RunEngine(store, {"agent": fake})
    hooks = recorder(engine)
    with anyio.fail_after(5):
        async with serving(engine):
            run = await engine.enqueue(account_id=ACCOUNT, title="hello", origin="user")
            done = await engine.wait_for(run.id)
            assert (done.status, done.output, done.attempt) == ("succeeded", {"ran": run.id}, 1)
            assert fake.calls[0].status == "running" and fake.calls[0].started_at is not None
            assert await engine.wait_for(run.id) == done
    assert hooks == [(run.id, "succeeded")]
    assert engine.running_ids() == set()


@pytest.mark.anyio
async def test_wait_for_an_already_terminal_run_returns_without_an_engine_serving(store: RunStore) -> None:
    run = add(store)
    store.finalize(run.id, Failed(code="x", message="no"))
    engine = RunEngine(store, {})
    with anyio.fail_after(1):
        assert (await engine.wait_for(run.id)).status == "failed"
        with pytest.raises(NotFound):
            await engine.wait_for("nope")


@pytest.mark.anyio
async def test_concurrency_never_exceeds_the_bound_and_every_run_finishes(store: RunStore) -> None:
    async def slow(run: RunRecord) -> Outcome:
        await anyio.sleep(0.01)
        return Succeeded()

    agents, workflows = Fake(slow), Fake(slow)
    engine = RunEngine(store, {"agent": agents, "workflow": workflows}, max_agent_runs=3, max_workflow_runs=2)
    with anyio.fail_after(5):
        async with serving(engine):
            runs = [await engine.enqueue(account_id=ACCOUNT, title=f"r{i}", origin="user") for i in range(20)]
            runs += [
                await engine.enqueue(account_id=ACCOUNT, title=f"w{i}", origin="workflow", kind="workflow")
                for i in range(6)
            ]
            finished = [await engine.wait_for(r.id) for r in runs]
    assert all(r.status == "succeeded" for r in finished)
    assert (len(agents.calls), agents.peak) == (20, 3)
    assert (len(workflows.calls), workflows.peak) == (6, 2)


@pytest.mark.anyio
async def test_a_session_never_has_two_turns_executing_at_once(db: Database, store: RunStore) -> None:
    one, two = session(db, "s1"), session(db, "s2")
    per_session: dict[str | None, int] = {}
    overlap: list[str] = []

    async def turn(run: RunRecord) -> Outcome:
        per_session[run.session_id] = per_session.get(run.session_id, 0) + 1
        if per_session[run.session_id] > 1:
            overlap.append(run.id)
        await anyio.sleep(0.02)
        per_session[run.session_id] -= 1
        return Succeeded()

    fake = Fake(turn)
    engine = RunEngine(store, {"agent": fake})
    for i in range(3):
        add(store, f"one-{i}", session_id=one)
        add(store, f"two-{i}", session_id=two)
    with anyio.fail_after(5):
        async with serving(engine):
            for run in store.live_on_session(one) + store.live_on_session(two):
                await engine.wait_for(run.id)
    assert overlap == []
    assert (len(fake.calls), fake.peak) == (6, 2)  # the two sessions did run side by side


@pytest.mark.anyio
async def test_interactive_runs_go_before_background_ones(store: RunStore) -> None:
    fake = Fake()
    engine = RunEngine(store, {"agent": fake}, max_agent_runs=1)
    background = [add(store, f"bg{i}") for i in range(3)]
    urgent = add(store, "urgent", queue="interactive")
    with anyio.fail_after(5):
        async with serving(engine):
            for run in [*background, urgent]:
                await engine.wait_for(run.id)
    assert fake.calls[0].id == urgent.id


@pytest.mark.anyio
async def test_a_retryable_failure_runs_again_after_backoff_and_a_plain_one_does_not(store: RunStore) -> None:
    async def flaky(run: RunRecord) -> Outcome:
        if run.title == "flaky" and run.attempt < 3:
            return Failed(code="provider-error", message=f"try {run.attempt}", retryable=True)
        if run.title == "broken":
            return Failed(code="config-error", message="bad key")
        return Succeeded(run.attempt)

    fake = Fake(flaky)
    engine = RunEngine(store, {"agent": fake}, retry_base_ms=20, retry_cap_ms=100)
    with anyio.fail_after(5):
        async with serving(engine):
            flaky_run = await engine.enqueue(account_id=ACCOUNT, title="flaky", origin="user", max_attempts=3)
            broken = await engine.enqueue(account_id=ACCOUNT, title="broken", origin="user", max_attempts=3)
            done = await engine.wait_for(flaky_run.id)
            failed = await engine.wait_for(broken.id)
    assert (done.status, done.output, done.attempt, done.error) == ("succeeded", 3, 3, None)
    retried = [r for r in fake.calls if r.id == flaky_run.id]
    assert [r.attempt for r in retried] == [1, 2, 3]
    assert retried[1].error == {"code": "provider-error", "message": "try 1", "retryable": True}
    assert (failed.status, failed.attempt) == ("failed", 1)
    assert failed.error == {"code": "config-error", "message": "bad key"}


@pytest.mark.anyio
async def test_executor_exceptions_and_missing_executors_fail_the_run(store: RunStore) -> None:
    async def explode(run: RunRecord) -> Outcome:
        raise ValueError("kaput")

    engine = RunEngine(store, {"agent": Fake(explode)}, retry_base_ms=1)
    with anyio.fail_after(5):
        async with serving(engine):
            boom = await engine.enqueue(account_id=ACCOUNT, title="boom", origin="user", max_attempts=3)
            script = await engine.enqueue(account_id=ACCOUNT, title="script", origin="user", kind="workflow")
            boomed = await engine.wait_for(boom.id)
            orphaned = await engine.wait_for(script.id)
    assert (boomed.status, boomed.attempt, boomed.error) == (
        "failed",
        1,
        {"code": "executor-error", "message": "ValueError: kaput"},
    )
    assert orphaned.status == "failed"
    assert orphaned.error is not None and orphaned.error["code"] == "no-executor"


@pytest.mark.anyio
async def test_a_parked_run_runs_again_from_scratch_once_requeued_and_keeps_its_usage(store: RunStore) -> None:
    parked = anyio.Event()
    engine: RunEngine

    async def turn(run: RunRecord) -> Outcome:
        await engine.add_usage(run.id, {"input": 10, "output": 1, "total": 11})
        if run.wait is None and len(fake.calls) == 1:
            parked.set()
            return Parked({"reason": "children", "toolCallIds": ["c1"]})
        return Succeeded("resumed")

    fake = Fake(turn)
    engine = RunEngine(store, {"agent": fake})
    hooks = recorder(engine)
    with anyio.fail_after(5):
        async with serving(engine):
            run = await engine.enqueue(account_id=ACCOUNT, title="parent", origin="user")
            await parked.wait()
            while (await anyio.to_thread.run_sync(store.get, run.id)).status != "waiting":
                await anyio.sleep(0.005)
            assert hooks == []
            assert await engine.requeue(run.id) is True
            done = await engine.wait_for(run.id)
    assert (done.status, done.output, done.attempt) == ("succeeded", "resumed", 2)
    assert done.usage == {"input": 20, "output": 2, "cacheRead": 0, "cacheWrite": 0, "total": 22}
    assert hooks == [(run.id, "succeeded")]


@pytest.mark.anyio
async def test_the_pump_requeues_a_timer_wait_when_it_falls_due(store: RunStore) -> None:
    wake_at = now_ms() + 200
    woke: list[int] = []

    async def nap(run: RunRecord) -> Outcome:
        if not woke and len(fake.calls) == 1:
            return Parked({"reason": "timer", "wakeAt": wake_at})
        woke.append(now_ms())
        return Succeeded()

    fake = Fake(nap)
    engine = RunEngine(store, {"agent": fake})
    with anyio.fail_after(5):
        async with serving(engine):
            run = await engine.enqueue(account_id=ACCOUNT, title="nap", origin="user")
            done = await engine.wait_for(run.id)
    assert done.status == "succeeded" and len(fake.calls) == 2
    assert woke[0] >= wake_at


@pytest.mark.anyio
async def test_cancel_cascades_through_queued_waiting_and_running_children(db: Database, store: RunStore) -> None:
    started = anyio.Event()
    stopped: list[str] = []

    async def slow(run: RunRecord) -> Outcome:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(run.id)
        raise AssertionError("unreachable")

    parent = add(store, "parent", session_id=session(db, "sp"))
    store.claim_next("boot", kinds=["agent"])
    store.park(parent.id, {"reason": "children", "toolCallIds": ["a", "b", "c"]})
    busy = session(db, "s-busy")
    waiting = add(store, "waiting", parent_run_id=parent.id, session_id=session(db, "sw"))
    store.park(waiting.id, {"reason": "event", "waitId": "w"})
    running = add(store, "running", parent_run_id=parent.id, session_id=busy)
    queued = add(store, "queued", parent_run_id=parent.id, session_id=busy)  # held back: its session is busy
    set_created(db, queued.id, running.created_at + 1)
    engine = RunEngine(store, {"agent": Fake(slow)})
    hooks = recorder(engine)
    with anyio.fail_after(5):
        async with serving(engine):
            await started.wait()
            assert engine.running_ids() == {running.id}
            assert await engine.cancel(parent.id) is True
            assert [store.get(r.id).status for r in (parent, waiting, queued)] == ["canceled"] * 3
            with anyio.fail_after(1):
                stopped_run = await engine.wait_for(running.id)
    assert stopped_run.status == "canceled"
    assert stopped == [running.id]
    assert sorted(hooks) == sorted((r.id, "canceled") for r in (parent, waiting, running, queued))
    assert await engine.cancel(parent.id) is False


@pytest.mark.anyio
async def test_cancel_ends_a_running_row_no_engine_is_executing(store: RunStore) -> None:
    run = add(store)
    store.claim_next("gone", kinds=["agent"])
    store.mark_running(run.id)
    engine = RunEngine(store, {})
    hooks = recorder(engine)
    with anyio.fail_after(5):
        assert await engine.cancel(run.id) is True
    assert store.get(run.id).status == "canceled"
    assert hooks == [(run.id, "canceled")]
    assert store.sweep_at_boot() == []


@pytest.mark.anyio
async def test_a_run_interrupted_by_shutdown_runs_again_after_restart(store: RunStore) -> None:
    started = anyio.Event()
    attempts: list[int] = []

    async def once_interrupted(run: RunRecord) -> Outcome:
        attempts.append(run.attempt)
        if len(attempts) == 1:
            started.set()
            await anyio.sleep_forever()
        return Succeeded("second time")

    first = RunEngine(store, {"agent": once_interrupted})
    first_hooks = recorder(first)
    run = add(store, "long")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(first.serve)
            await started.wait()
            tg.cancel_scope.cancel()
    assert store.get(run.id).status == "running"  # exactly what a crash leaves
    assert first.running_ids() == set() and first_hooks == []

    second = RunEngine(store, {"agent": once_interrupted})
    second_hooks = recorder(second)
    with anyio.fail_after(5):
        async with serving(second):
            done = await second.wait_for(run.id)
    assert (done.status, done.output, done.attempt) == ("succeeded", "second time", 2)
    assert attempts == [1, 2]
    assert first_hooks == [] and second_hooks == [(run.id, "succeeded")]


@pytest.mark.anyio
async def test_an_engine_booting_beside_a_live_one_requeues_only_the_runs_of_gone_holders(store: RunStore) -> None:
    executing: list[str] = []

    async def held(run: RunRecord) -> Outcome:
        executing.append(run.id)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    first = RunEngine(store, {"agent": held})
    with anyio.fail_after(10):
        async with serving(first):
            live = add(store, "executing in the first engine")
            while executing != [live.id]:
                await anyio.sleep(0.01)
            with store.db.transaction() as conn:  # as a process that died mid-run leaves it
                abandoned = add(store, "left by a dead process")
                conn.execute(
                    "UPDATE runs SET status = 'running', lease_owner = 'gone', attempt = 1 WHERE id = ?",
                    (abandoned.id,),
                )
            async with serving(RunEngine(store, {"agent": held})):  # boots while the first executes its run
                now = store.get(live.id)
                assert (now.status, now.lease_owner, now.attempt) == ("running", first.owner, 1)
                while len(executing) < 2:
                    await anyio.sleep(0.01)
    assert executing == [live.id, abandoned.id], "each run executed once"
    assert store.get(abandoned.id).attempt == 2


@pytest.mark.anyio
async def test_wake_from_a_worker_thread_starts_work_enqueued_behind_the_engines_back(store: RunStore) -> None:
    fake = Fake()
    engine = RunEngine(store, {"agent": fake}, poll_interval_s=60)  # so only the wake can start the run in time

    def enqueue_elsewhere() -> RunRecord:
        assert threading.current_thread() is not threading.main_thread()
        run = add(store, "from a thread")
        engine.wake()
        return run

    with anyio.fail_after(5):
        async with serving(engine):
            await anyio.sleep(0.01)  # let the pump go idle
            run = await anyio.to_thread.run_sync(enqueue_elsewhere)
            assert (await engine.wait_for(run.id)).status == "succeeded"


@pytest.mark.anyio
async def test_the_idle_poll_starts_a_run_enqueued_without_a_wake(store: RunStore) -> None:
    engine = RunEngine(store, {"agent": Fake()}, poll_interval_s=0.05)
    with anyio.fail_after(5):
        async with serving(engine):
            await anyio.sleep(0.01)
            run = add(store, "enqueued straight into the store")
            assert (await engine.wait_for(run.id)).status == "succeeded"


@pytest.mark.anyio
async def test_complete_finalizes_from_outside_and_stops_the_execution(store: RunStore) -> None:
    started = anyio.Event()
    stopped: list[str] = []

    async def waits(run: RunRecord) -> Outcome:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(run.id)
        raise AssertionError("unreachable")

    engine = RunEngine(store, {"agent": Fake(waits)})
    hooks = recorder(engine)
    with anyio.fail_after(5):
        async with serving(engine):
            run = await engine.enqueue(account_id=ACCOUNT, title="child", origin="agent")
            await started.wait()
            completed = await engine.complete(run.id, Succeeded({"answer": 42}))
            assert (completed.status, completed.output) == ("succeeded", {"answer": 42})
            while engine.running_ids():
                await anyio.sleep(0.005)
    assert stopped == [run.id]
    assert store.get(run.id).output == {"answer": 42}
    assert hooks == [(run.id, "succeeded")]


@pytest.mark.anyio
async def test_a_requeued_run_is_not_claimed_while_its_previous_execution_winds_down(store: RunStore) -> None:
    engine: RunEngine

    async def parks_itself(run: RunRecord) -> Outcome:
        if len(fake.calls) == 1:
            # As the agent loop does: park in the store, then a child resolves and requeues before we return.
            await anyio.to_thread.run_sync(store.park, run.id, {"reason": "children", "toolCallIds": ["c"]})
            assert await engine.requeue(run.id)
            await anyio.sleep(0.05)
            return Parked({"reason": "children", "toolCallIds": ["c"]})
        return Succeeded("after the child")

    fake = Fake(parks_itself)
    engine = RunEngine(store, {"agent": fake})
    with anyio.fail_after(5):
        async with serving(engine):
            run = await engine.enqueue(account_id=ACCOUNT, title="parent", origin="user")
            done = await engine.wait_for(run.id)
    assert (done.status, done.output, len(fake.calls), fake.peak) == ("succeeded", "after the child", 2, 1)


@pytest.mark.anyio
async def test_child_usage_reported_through_the_engine_rolls_up_to_the_parent(store: RunStore) -> None:
    engine: RunEngine

    async def spend(run: RunRecord) -> Outcome:
        await engine.add_usage(run.id, {"input": 5, "output": 5})
        return Succeeded()

    engine = RunEngine(store, {"agent": Fake(spend)})
    parent = add(store, "parent")
    store.park(parent.id, {"reason": "children", "toolCallIds": ["a"]})
    with anyio.fail_after(5):
        async with serving(engine):
            child = await engine.enqueue(
                account_id=ACCOUNT, title="child", origin="agent", parent_run_id=parent.id, parent_tool_call_id="a"
            )
            await engine.wait_for(child.id)
    usage = store.get(parent.id).usage
    assert usage is not None and usage["children"] == {
        "input": 5,
        "output": 5,
        "cacheRead": 0,
        "cacheWrite": 0,
        "total": 10,
        "runs": 1,
    }


class Effects(Fake):
    """A fake executor with terminal effects: `settled` records each run in the `effects` table, in the terminal
    transaction (and fails for a run titled "bad effects")."""

    def __init__(self, db: Database, behave: Callable[[RunRecord], Awaitable[Outcome]] | None = None) -> None:
        super().__init__(behave)
        self.db = db
        with db.transaction() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS effects (run_id TEXT, status TEXT)")

    def settled(self, run: RunRecord) -> None:
        with self.db.transaction() as conn:
            assert conn.in_transaction
            conn.execute("INSERT INTO effects VALUES (?, ?)", (run.id, run.status))
            if run.title == "bad effects":
                raise RuntimeError("boom")


def effects(db: Database) -> list[tuple[str, str]]:
    with db.reading() as conn:
        return [(row[0], row[1]) for row in conn.execute("SELECT run_id, status FROM effects ORDER BY rowid")]


@pytest.mark.anyio
async def test_terminal_effects_commit_with_every_terminal_state_and_a_failing_one_rolls_back_alone(
    db: Database, store: RunStore
) -> None:
    started = anyio.Event()

    async def behave(run: RunRecord) -> Outcome:
        if run.title == "waits":
            started.set()
            await anyio.sleep_forever()
        return Succeeded(run.title)

    executor = Effects(db, behave)
    engine = RunEngine(store, {"agent": executor})
    hooks = recorder(engine)
    assert engine.applies_terminal_effects("agent") and not engine.applies_terminal_effects("workflow")
    parked = add(store, "parked, then canceled")
    store.park(parked.id, {"reason": "children", "toolCallIds": ["c"]})
    with anyio.fail_after(5):
        async with serving(engine):
            ok = await engine.enqueue(account_id=ACCOUNT, title="ok", origin="user")
            bad = await engine.enqueue(account_id=ACCOUNT, title="bad effects", origin="user")
            assert (await engine.wait_for(ok.id)).status == "succeeded"
            assert (await engine.wait_for(bad.id)).status == "succeeded"  # the terminal commit stands
            waiting = await engine.enqueue(account_id=ACCOUNT, title="waits", origin="user")
            await started.wait()
            await engine.complete(waiting.id, Failed(code="x", message="from outside"))
            assert await engine.cancel(parked.id)
    assert effects(db) == [(ok.id, "succeeded"), (waiting.id, "failed"), (parked.id, "canceled")]
    assert sorted(hooks) == sorted(
        [(ok.id, "succeeded"), (bad.id, "succeeded"), (waiting.id, "failed"), (parked.id, "canceled")]
    )


@pytest.mark.anyio
async def test_settle_now_commits_with_the_executors_last_write_and_fires_the_hooks_once(
    db: Database, store: RunStore
) -> None:
    engine: RunEngine
    with db.transaction() as conn:
        conn.execute("CREATE TABLE replies (run_id TEXT)")

    def last_write(run: RunRecord, outcome: Outcome) -> None:
        with db.transaction() as conn:
            conn.execute("INSERT INTO replies VALUES (?)", (run.id,))
            settled = engine.settle_now(run.id, outcome)
            assert settled is not None and settled.status == "succeeded"
            assert engine._running[run.id].settled is None  # pyright: ignore[reportPrivateUsage]  (not committed yet)

    async def finishes_early(run: RunRecord) -> Outcome:
        await engine.offload(last_write, run, Succeeded("early"))
        return Failed(code="ignored", message="the run already ended")

    executor = Effects(db, finishes_early)
    engine = RunEngine(store, {"agent": executor})
    hooks = recorder(engine)
    with anyio.fail_after(5):
        async with serving(engine):
            run = await engine.enqueue(account_id=ACCOUNT, title="early", origin="user")
            done = await engine.wait_for(run.id)
    assert (done.status, done.output) == ("succeeded", "early")
    assert store.get(run.id).output == "early"
    assert hooks == [(run.id, "succeeded")] and effects(db) == [(run.id, "succeeded")]
    with db.reading() as conn:
        assert conn.execute("SELECT run_id FROM replies").fetchall()[0][0] == run.id
    assert engine.settle_now("not-executing", Succeeded()) is None


@pytest.mark.anyio
async def test_settle_now_after_a_cancel_was_requested_commits_canceled(store: RunStore) -> None:
    """A cancel that reached the run's scope while its last write was under way sticks, as at the end of a run."""
    engine: RunEngine
    proceed = threading.Event()
    writing = anyio.Event()

    def last_write(run: RunRecord) -> None:
        proceed.wait(5)
        engine.settle_now(run.id, Succeeded("too late"))

    async def slow_last_write(run: RunRecord) -> Outcome:
        writing.set()
        await engine.offload(last_write, run)
        return Succeeded("too late")

    engine = RunEngine(store, {"agent": Fake(slow_last_write)})
    hooks = recorder(engine)
    with anyio.fail_after(5):
        async with serving(engine):
            run = await engine.enqueue(account_id=ACCOUNT, title="canceled mid-write", origin="user")
            await writing.wait()
            engine._running[run.id].scope.cancel()  # pyright: ignore[reportPrivateUsage]  (what cancel() does)
            proceed.set()
            done = await engine.wait_for(run.id)
    assert done.status == "canceled"
    assert hooks == [(run.id, "canceled")]
