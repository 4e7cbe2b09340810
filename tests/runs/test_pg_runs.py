"""Runs across replicas on one PostgreSQL database (docs/postgres.md, "Runs across replicas"): two engines, each with
a database object of its own as two replicas have, claim every run exactly once, keep `max_agent_runs` between
them, take over the runs of a dead engine with the journal's exactly-once guarantee, drop a paused engine's late
outcome, and wake on another replica's enqueue without waiting for their poll."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, cast

import anyio
import pytest

from mcp_harness.runs import Outcome, RunEngine, RunRecord, Succeeded
from mcp_harness.store.db import Database
from mcp_harness.store.pg import PgDatabase
from mcp_harness.store.runs import RunStore
from tests.runs.conftest import Fake, add, seed, serving
from tests.store.pgkit import cluster

pytestmark = pytest.mark.anyio
LONG_POLL_S = 3600.0
"""A poll interval no test waits out: what happens sooner happened for another reason."""


@pytest.fixture
def replicas(request: pytest.FixtureRequest) -> Iterator[tuple[RunStore, RunStore]]:
    """Two replicas' run stores on one fresh database."""
    url = cluster(request).new_database(migrated=True)
    dbs = [cast(Database, PgDatabase(url, pool_size=4)) for _ in range(2)]
    seed(dbs[0])
    try:
        yield RunStore(dbs[0]), RunStore(dbs[1])
    finally:
        for db in dbs:
            db.close()


@asynccontextmanager
async def fleet(*engines: RunEngine) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        for engine in engines:
            await stack.enter_async_context(serving(engine))
        yield


async def until(condition: Any, timeout: float = 20.0) -> None:
    """Wait for a condition the engines bring about (polled on the loop; fails after `timeout`)."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.02)


def statuses(store: RunStore, ids: list[str]) -> set[str]:
    return {store.get(run_id).status for run_id in ids}


async def test_two_engines_claim_every_run_exactly_once(replicas: tuple[RunStore, RunStore]) -> None:
    a, b = replicas
    fake = Fake(lambda run: _pause(run, 0.01))
    engines = [RunEngine(s, {"agent": fake}, max_agent_runs=4, poll_interval_s=0.02) for s in (a, b)]
    ids = [add(a, f"r{i}").id for i in range(24)]
    async with fleet(*engines):
        await until(lambda: statuses(a, ids) == {"succeeded"})
    assert sorted(r.id for r in fake.calls) == sorted(ids)  # each run executed once, none twice
    assert {a.get(i).attempt for i in ids} == {1}
    assert fake.peak <= 4  # the fleet's limit, shared by both engines


async def test_concurrent_claims_never_take_a_run_twice(replicas: tuple[RunStore, RunStore]) -> None:
    a, b = replicas
    ids = {add(a, f"r{i}").id for i in range(60)}
    taken: list[str] = []
    lock = threading.Lock()

    def claimer(store: RunStore, owner: str) -> None:
        while batch := store.claim_batch(owner, {"agent": 3}, limits={"agent": 100}):
            with lock:
                taken.extend(r.id for r in batch)

    threads = [threading.Thread(target=claimer, args=(s, f"o{i}")) for i, s in enumerate((a, b, a, b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted(ids)


async def test_max_agent_runs_holds_across_two_engines(replicas: tuple[RunStore, RunStore]) -> None:
    a, b = replicas
    release = anyio.Event()

    async def held(run: RunRecord) -> Outcome:
        await release.wait()
        return Succeeded()

    fake = Fake(held)
    engines = [RunEngine(s, {"agent": fake}, max_agent_runs=2, poll_interval_s=0.02) for s in (a, b)]
    ids = [add(a, f"r{i}").id for i in range(5)]
    async with fleet(*engines):
        await until(lambda: len(fake.active) == 2)
        for engine in engines:  # passes, each engine with free slots of its own: the fleet has none
            engine.wake()
        await anyio.sleep(0.2)
        assert len(fake.active) == 2 and sum(len(e.running_ids()) for e in engines) == 2
        release.set()
        await until(lambda: statuses(a, ids) == {"succeeded"})
    assert fake.peak == 2 and len(fake.calls) == 5


async def test_a_dead_engines_run_is_taken_over_and_its_journal_replays(replicas: tuple[RunStore, RunStore]) -> None:
    a, b = replicas
    sent: list[str] = []

    async def mailer(run: RunRecord) -> Outcome:
        # A script's exactly-once in miniature: an effect recorded in the journal is never done again.
        if not any(e.get("key") == "mail" for e in b.journal(run.id)):
            sent.append(run.id)
            await engine.offload(b.append_journal, run.id, [{"callSeq": 1, "kind": "tool", "key": "mail"}])
        return Succeeded({"mailed": len(b.journal(run.id))})

    engine = RunEngine(b, {"agent": mailer}, heartbeat_ms=20, poll_interval_s=LONG_POLL_S)
    async with fleet(engine):
        with a.db.transaction():  # a replica claims it and mails, then dies (killed -9: no instance row is left)
            run = add(a)
            a.claim_batch("killed-replica", {"agent": 1})
            a.append_journal(run.id, [{"callSeq": 1, "kind": "tool", "key": "mail"}])
        # The surviving engine's periodic sweep (not its boot sweep: it booted before) requeues and runs it.
        await until(lambda: a.get(run.id).status == "succeeded")
    done = a.get(run.id)
    assert (done.attempt, done.lease_owner, done.output, sent) == (2, None, {"mailed": 1}, [])


async def test_a_paused_engines_late_outcome_is_dropped(replicas: tuple[RunStore, RunStore]) -> None:
    a, b = replicas
    go_a, go_b = anyio.Event(), anyio.Event()

    async def on_a(run: RunRecord) -> Outcome:
        with anyio.CancelScope(shield=True):  # it wakes up late, whatever its engine says
            await go_a.wait()
        return Succeeded({"by": "a"})

    async def on_b(run: RunRecord) -> Outcome:
        await go_b.wait()
        return Succeeded({"by": "b"})

    paused = RunEngine(a, {"agent": Fake(on_a)}, poll_interval_s=LONG_POLL_S)
    survivor = RunEngine(b, {"agent": Fake(on_b)}, heartbeat_ms=20, poll_interval_s=LONG_POLL_S)
    async with fleet(paused):
        run = add(a)
        paused.wake()
        await until(lambda: a.get(run.id).status == "running")
        with a.db.transaction() as conn:  # its heartbeat stops (a stopped VM): it looks dead from elsewhere
            conn.execute("UPDATE instances SET host = 'paused-host', heartbeat_at = 0 WHERE id = ?", (paused.owner,))
        async with fleet(survivor):
            await until(lambda: a.get(run.id).lease_owner == survivor.owner)
            go_a.set()
            await until(lambda: run.id not in paused.running_ids())
            assert (a.get(run.id).status, a.get(run.id).output) == ("running", None)  # the late outcome: dropped
            go_b.set()
            await until(lambda: a.get(run.id).status == "succeeded")
    assert a.get(run.id).output == {"by": "b"}


async def test_an_enqueue_on_another_replica_wakes_an_idle_engine(replicas: tuple[RunStore, RunStore]) -> None:
    a, b = replicas
    fake = Fake()
    engine = RunEngine(b, {"agent": fake}, poll_interval_s=LONG_POLL_S, heartbeat_ms=3_600_000)
    passes = [0]
    dispatch = engine._dispatch  # pyright: ignore[reportPrivateUsage]

    def counted(free: dict[str, int], busy: set[str]) -> tuple[list[RunRecord], int | None]:
        try:
            return dispatch(free, busy)
        finally:
            passes[0] += 1

    engine._dispatch = counted  # pyright: ignore[reportPrivateUsage]
    async with fleet(engine):
        await until(lambda: passes[0] >= 1)  # its first pass found nothing: it now sleeps for the long poll
        run = add(a)  # through the other replica's store: no wake() reaches this engine, only the NOTIFY
        await until(lambda: a.get(run.id).status == "succeeded")
    assert [r.id for r in fake.calls] == [run.id] and passes[0] >= 2


async def _pause(run: RunRecord, seconds: float) -> Outcome:
    await anyio.sleep(seconds)
    return Succeeded({"ran": run.id})
