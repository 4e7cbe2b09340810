"""The run engine: executing runs once, concurrency bounds, retries, parking, timers, cancellation, restarts,
usage roll-up and terminal effects."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread
import pytest

from mcp_harness.errors import NotFound
from mcp_harness.runs import Failed, Outcome, Parked, RunEngine, RunRecord, Succeeded
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database
from mcp_harness.store.runs import RunStore
from tests.runs.conftest import ACCOUNT, Fake, add, recorder, serving, session, set_created


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
        await anyio.sleep(0.05)  # long beside a claim on either backend, so the bound is reached, not only kept
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
            conn.execute("CREATE TABLE IF NOT EXISTS effects (n INTEGER PRIMARY KEY, run_id TEXT, status TEXT)")

    def settled(self, run: RunRecord) -> None:
        with self.db.transaction() as conn:
            assert conn.in_transaction
            conn.execute("INSERT INTO effects (run_id, status) VALUES (?, ?)", (run.id, run.status))
            if run.title == "bad effects":
                raise RuntimeError("boom")


def effects(db: Database) -> list[tuple[str, str]]:
    with db.reading() as conn:
        return [(row[0], row[1]) for row in conn.execute("SELECT run_id, status FROM effects ORDER BY n")]


@pytest.mark.anyio
@pytest.mark.parametrize("atomic", [False, True], ids=["engine-savepoint", "own-savepoint"])
async def test_terminal_effects_commit_with_every_terminal_state_and_a_failing_one_rolls_back_alone(
    db: Database, store: RunStore, atomic: bool
) -> None:
    started = anyio.Event()

    async def behave(run: RunRecord) -> Outcome:
        if run.title == "waits":
            started.set()
            await anyio.sleep_forever()
        return Succeeded(run.title)

    executor = Effects(db, behave)
    executor.settles_atomically = atomic  # pyright: ignore[reportAttributeAccessIssue]  (its savepoint, not the engine's)
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
