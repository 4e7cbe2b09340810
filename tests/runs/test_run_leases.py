"""Leases across engines (store/run_leases.py), on SQLite and on PostgreSQL: the sweep of dead owners, the late
writes of an owner that lost its run, and the fleet's limits counted in the claim."""

from __future__ import annotations

import pytest

from mcp_harness.runs import Failed, Parked, Succeeded
from mcp_harness.store import instances
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database
from mcp_harness.store.run_claims import CANDIDATES_SLACK
from mcp_harness.store.run_leases import LeaseLost, executing, require_leases
from mcp_harness.store.runs import RunStore
from tests.runs.conftest import add


def _register(db: Database, owner: str, *, host: str, heartbeat_at: int) -> None:
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO instances (id, host, pid, proc_start, started_at, heartbeat_at) VALUES (?, ?, 1, NULL, 0, ?)",
            (owner, host, heartbeat_at),
        )


def test_the_sweep_requeues_only_the_runs_of_dead_owners(db: Database, store: RunStore) -> None:
    _register(db, "alive-elsewhere", host="other-host", heartbeat_at=now_ms())
    _register(db, "stale-elsewhere", host="other-host", heartbeat_at=now_ms() - instances.STALE_MS - 1)
    for _ in range(3):
        add(store)
    held: dict[str, str] = {}  # owner → the run it claimed (runs queued in one millisecond claim in id order)
    for owner in ("alive-elsewhere", "stale-elsewhere", "never-registered"):
        (claimed,) = store.claim_batch(owner, {"agent": 1})
        held[owner] = claimed.id
    kept, stale, unknown = (store.get(held[o]) for o in ("alive-elsewhere", "stale-elsewhere", "never-registered"))
    assert sorted(store.sweep_dead_owners()) == sorted([stale.id, unknown.id])
    assert store.get(kept.id).lease_owner == "alive-elsewhere"
    assert [(store.get(r).status, store.get(r).lease_owner, store.get(r).attempt) for r in (stale.id, unknown.id)] == [
        ("queued", None, 1),
        ("queued", None, 1),
    ]
    assert store.sweep_dead_owners() == []  # all alive now: one read, no write


def test_a_taken_over_runs_late_writes_are_dropped(db: Database, store: RunStore) -> None:
    run = add(store)
    assert store.claim_batch("paused", {"agent": 1})[0].id == run.id
    assert store.sweep_dead_owners() == [run.id]  # "paused" has no instance row: gone, as far as anyone can tell
    assert store.claim_batch("new", {"agent": 1})[0].id == run.id
    record, done = store.settle(run.id, Succeeded({"by": "paused"}), owner="paused", usage={"input": 3})
    assert not done and (record.status, record.lease_owner, record.output) == ("running", "new", None)
    assert (record.usage or {}).get("input") == 3  # spent tokens still count
    assert store.mark_running(run.id, "paused") is None
    assert store.lost_among("paused", [run.id]) == [run.id] and store.lost_among("new", [run.id]) == []
    with executing(run.id, "paused"):
        with pytest.raises(LeaseLost):
            store.append_journal(run.id, [{"callSeq": 1, "kind": "tool", "key": "k"}])
        with pytest.raises(LeaseLost):
            store.park(run.id, {"reason": "timer", "wakeAt": now_ms() + 1000})
        with pytest.raises(LeaseLost):
            store.set_plan(run.id, {"steps": []})
    with executing(run.id, "new"):  # the new owner's writes land
        assert store.append_journal(run.id, [{"callSeq": 1, "kind": "tool", "key": "k"}]) > 0
    assert store.journal(run.id) == [{"callSeq": 1, "kind": "tool", "key": "k"}]
    assert store.settle(run.id, Succeeded({"by": "new"}), owner="new")[1]
    assert store.get(run.id).output == {"by": "new"}


def test_an_owner_whose_run_nobody_else_holds_still_settles_it(store: RunStore) -> None:
    parked, swept = add(store), add(store)
    store.claim_batch("me", {"agent": 2})
    with executing(parked.id, "me"):  # the execution parks its own row (a child then requeues it, say)
        store.park(parked.id, {"reason": "children", "childRunIds": ["c"]})
    assert store.settle(parked.id, Parked({"reason": "children"}), owner="me") == (store.get(parked.id), False)
    assert store.settle(parked.id, Failed(code="x", message="late"), owner="me")[0].status == "failed"
    assert store.sweep_dead_owners() == [swept.id]  # "me" has no instance row; nobody claimed the run since
    assert store.settle(swept.id, Succeeded({"late": True}), owner="me")[0].output == {"late": True}


def test_fleet_limits_count_every_owners_live_runs(store: RunStore) -> None:
    for _ in range(5):
        add(store)
    limits = {"agent": 3}
    first = store.claim_batch("a", {"agent": 2}, limits=limits)
    second = store.claim_batch("b", {"agent": 2}, limits=limits)
    assert (len(first), len(second)) == (2, 1)  # b had two free slots of its own, the fleet one
    assert store.claim_batch("b", {"agent": 2}, limits=limits) == []
    store.settle(first[0].id, Succeeded(), owner="a")
    third = store.claim_batch("b", {"agent": 2}, limits=limits)
    assert len(third) == 1 and store.claim_batch("a", {"agent": 2}) != []  # without limits: this engine's own


def test_a_claim_pass_reads_a_bounded_queue_and_a_kind_at_its_limit_starves_no_other(store: RunStore) -> None:
    backlog = {add(store, f"a{i}").id for i in range(3 * CANDIDATES_SLACK)}  # more than one pass reads
    late = add(store, "the workflow behind them", kind="workflow", origin="workflow")
    limits = {"agent": 1}
    (first,) = store.claim_batch("a", {"agent": 1}, limits=limits)  # runs queued in one millisecond: by id
    assert first.id in backlog
    (workflow,) = store.claim_batch("a", {"agent": 1, "workflow": 1}, limits=limits)
    assert workflow.id == late.id, "agents at their fleet limit do not fill the pass's candidates"


def test_a_batch_of_writes_for_several_runs_checks_every_runs_lease_at_once(db: Database, store: RunStore) -> None:
    mine, also_mine, lost = add(store), add(store), add(store)
    store.claim_batch("me", {"agent": 3})
    with db.transaction() as conn:  # another engine took one over
        conn.execute("UPDATE runs SET lease_owner = 'new' WHERE id = ?", (lost.id,))
    with db.transaction() as conn:
        require_leases(conn, [mine.id, also_mine.id], "me", "reply")  # all held here: nothing raised
        with pytest.raises(LeaseLost, match=lost.id):
            require_leases(conn, [mine.id, lost.id, also_mine.id], "me", "reply")
        require_leases(conn, [], "me", "reply")
