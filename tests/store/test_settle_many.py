"""Runs settled together (`RunStore.settle_many_within`) end exactly as each settled alone would, on both backends:
the same rows, the same usage roll-ups into the parent, the same flags; and the records handed back (built from the
rows as read, not read back) are what a read of the rows returns. On SQLite the runs that end cost one read and
one write statement, whatever their number."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.errors import NotFound
from mcp_harness.runs import Canceled, Failed, Parked, Succeeded
from mcp_harness.runs.records import RunRecord
from mcp_harness.store.agents import AgentStore
from mcp_harness.store.db import Database
from mcp_harness.store.run_settle import Settlement
from mcp_harness.store.runs import RunStore
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the fixture)

OWNER = "engine-a"
VOLATILE = {"id", "root_run_id", "parent_run_id", "title", "created_at", "started_at", "finished_at", "updated_at"}
VOLATILE |= {"lease_expires_at"}  # claimed at another moment


def _family(runs: RunStore, tag: str) -> tuple[str, list[str]]:
    """A parent and six children in the states the outcomes below meet, claimed by OWNER (one by someone else)."""
    parent = runs.enqueue(account_id="acct", title=f"{tag} parent", origin="user").id
    kids = [
        runs.enqueue(account_id="acct", title=f"{tag} {i}", origin="agent", parent_run_id=parent).id for i in range(6)
    ]
    runs.claim_batch(OWNER, {"agent": 10}, lease_ms=60_000, exclude=set())
    for kid in kids:
        runs.mark_running(kid, OWNER)
    runs.add_usage(kids[0], {"input": 2, "output": 1})
    runs.settle(kids[4], Succeeded("already"))  # terminal before its batch: the outcome is discarded
    with runs.db.transaction() as conn:  # another engine took kids[5] over
        conn.execute("UPDATE runs SET lease_owner = 'engine-b' WHERE id = ?", (kids[5],))
    return parent, kids


def _outcomes(kids: list[str]) -> list[Settlement]:
    return [
        (kids[0], Succeeded({"text": "leaf done"}), {"input": 10, "output": 5}),
        (kids[1], Canceled(), None),
        (kids[2], Failed(code="boom", message="it broke"), {"input": 1}),
        (kids[3], Parked({"reason": "children", "toolCallIds": ["c"]}), {"output": 2}),
        (kids[4], Succeeded("late"), {"output": 3}),
        (kids[5], Succeeded("not mine"), None),
    ]


def _comparable(record: RunRecord) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(record).items() if k not in VOLATILE}


def _settled(runs: RunStore, settle: Callable[[Any, list[Settlement]], list[tuple[RunRecord, bool]]], tag: str) -> Any:
    parent, kids = _family(runs, tag)
    with runs.db.transaction() as conn:
        pairs = settle(conn, _outcomes(kids))
    stored = [runs.get(kid) for kid in kids]
    return parent, pairs, stored


# `Database` here: RunStore is typed against SQLite's classes still (not the port's), as in test_pg_stores.py.
def test_runs_settled_together_end_as_each_settled_alone(any_db: Database, tmp_path: Path) -> None:
    AgentStore(any_db, tmp_path).ensure_account("acct", "owner")
    runs = RunStore(any_db)
    one_by_one = _settled(
        runs, lambda conn, items: [runs.settle_within(conn, i, o, usage=u, owner=OWNER) for i, o, u in items], "a"
    )
    together = _settled(runs, lambda conn, items: runs.settle_many_within(conn, items, owner=OWNER), "b")
    for _, pairs, stored in (one_by_one, together):
        assert [done for _, done in pairs] == [True, True, True, False, False, False]
        assert [r.status for r in stored] == ["succeeded", "canceled", "failed", "waiting", "succeeded", "running"]
        # What is handed back is what a read returns: the ended records are built, not read back.
        assert [_comparable(r) for r, _ in pairs] == [_comparable(r) for r in stored]
        assert [(r.finished_at, r.updated_at) for r, _ in pairs[:3]] == [
            (r.finished_at, r.updated_at) for r in stored[:3]
        ]
    assert [_comparable(r) for r in one_by_one[2]] == [_comparable(r) for r in together[2]]
    assert together[2][0].usage is not None and together[2][0].usage["input"] == 12
    assert together[2][0].output == {"text": "leaf done"} and together[2][4].output == "already"
    rolled = [(runs.get(parent).usage or {}).get("children") for parent in (one_by_one[0], together[0])]
    assert (
        rolled[0] == rolled[1] and rolled[1] is not None and rolled[1]["runs"] == 4
    )  # the three ended here and the one before


def test_a_missing_run_fails_the_batch_before_anything_is_written(any_db: Database, tmp_path: Path) -> None:
    AgentStore(any_db, tmp_path).ensure_account("acct", "owner")
    runs = RunStore(any_db)
    _, kids = _family(runs, "m")
    with pytest.raises(NotFound, match="No run nowhere"), runs.db.transaction() as conn:
        runs.settle_many_within(conn, [(kids[0], Succeeded("x"), None), ("nowhere", Succeeded("y"), None)])
    assert runs.get(kids[0]).status == "running"


def test_runs_ending_together_cost_one_read_and_one_write_statement(tmp_path: Path) -> None:
    db = Database(tmp_path / "harness.db")
    try:
        AgentStore(db, tmp_path).ensure_account("acct", "owner")
        runs = RunStore(db)
        parent = runs.enqueue(account_id="acct", title="parent", origin="user").id
        kids = [
            runs.enqueue(account_id="acct", title=f"k{i}", origin="agent", parent_run_id=parent).id for i in range(20)
        ]
        runs.claim_batch(OWNER, {"agent": 30}, lease_ms=60_000, exclude=set())
        statements: list[str] = []
        with db.transaction() as conn, runs.roll_ups_grouped(conn):  # as the engine's batches settle
            db._conn.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]
            try:
                pairs = runs.settle_many_within(conn, [(k, Succeeded("ok"), {"output": 1}) for k in kids], owner=OWNER)
            finally:
                db._conn.set_trace_callback(None)  # pyright: ignore[reportPrivateUsage]
        assert all(done for _, done in pairs) and {runs.get(k).status for k in kids} == {"succeeded"}
        on_runs = [s.split(" WHERE")[0] for s in statements if " runs " in f"{s} "]
        assert sum(s.startswith("SELECT") for s in on_runs) == 1
        # executemany: the one prepared UPDATE, stepped once per run (the trace shows each step).
        assert len({s for s in on_runs if s.startswith("UPDATE")}) == 1 and len(on_runs) == 1 + len(kids)
        children = (runs.get(parent).usage or {})["children"]  # held by the group, rolled up once at its end
        assert (children["output"], children["runs"]) == (len(kids), len(kids))
    finally:
        db.close()
