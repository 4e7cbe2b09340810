"""Leases across engines and replicas: whose run this is, the periodic sweep of dead owners, and dropping the late
writes of an owner that lost its run (docs/postgres.md, "Runs across replicas").

A claim writes `lease_owner`, the claiming engine's instance id (`store/instances.py`). An owner counts as alive by
its `instances` row — its pid on this host, its heartbeat (`instances.STALE_MS`) elsewhere — rather than by
`lease_expires_at` renewed per run: the heartbeat already exists, one row per engine instead of one write per
running run per beat. Every engine sweeps periodically (on its heartbeat) the runs of owners that are gone back
to the queue; their journals replay there exactly as after a restart.

An owner that was only paused (a stopped VM, a long GC) past `STALE_MS` wakes up still executing runs that another
engine may have taken over. So the writes an execution makes to its own run are dropped once another engine holds
it: `settle_within(..., owner=)` drops a late outcome (logged), and `park`, `append_journal` and `set_plan` called
from inside an execution (the engine marks its task with `executing`) raise `LeaseLost`, which rolls back the
caller's whole transaction (a child spawned with its journal entry, say). The engine also stops executing a run
another engine holds. Side effects of the paused owner outside the store (a tool call under way) cannot be
undone; the journal's exactly-once guarantee covers an effect once its entry is recorded.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mcp_harness.errors import Conflict
from mcp_harness.store import instances
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database
from mcp_harness.store.dialect import backend

logger = logging.getLogger(__name__)

_executing: ContextVar[tuple[str, str] | None] = ContextVar("mcp_harness_run_lease", default=None)
"""(run id, lease owner) of the execution this task belongs to, set by the engine for its run's task."""


class LeaseLost(Conflict):
    """An execution wrote to a run that another engine holds now: dropped."""


@contextmanager
def executing(run_id: str, owner: str) -> Iterator[None]:
    """Within: this task (and whatever it starts, threads included) executes `run_id` under `owner`'s lease."""
    token = _executing.set((run_id, owner))
    try:
        yield
    finally:
        _executing.reset(token)


@contextmanager
def released() -> Iterator[None]:
    """Within: no lease is checked (a terminal commit's effects write to the run the commit just ended)."""
    token = _executing.set(None)
    try:
        yield
    finally:
        _executing.reset(token)


def holder(run_id: str) -> str | None:
    """The lease owner the current task executes `run_id` under; None outside that run's execution."""
    held = _executing.get()
    return held[1] if held is not None and held[0] == run_id else None


def held_elsewhere(row: Any, owner: str) -> bool:
    """Whether another engine than `owner` holds the run now (claimed or running under its lease). A row nobody
    holds (requeued by a sweep and not claimed again, or parked by the execution itself) still takes `owner`'s
    writes: they are the one execution's, and the next claim replays them (SQLite's single engine, unchanged)."""
    return row["status"] in ("claimed", "running") and row["lease_owner"] != owner


def require_lease(conn: sqlite3.Connection, run_id: str, what: str) -> None:
    """Raise `LeaseLost` when the current task executes `run_id` but the row is no longer its own (a takeover).
    Outside an execution (a signal, an operator) nothing is checked. In the caller's transaction: the writer lock
    keeps the check and the write together on SQLite; on PostgreSQL claims do not take that lock, so the check locks
    the row (a claim in flight is waited for and seen, a later one skips the row until this write commits)."""
    owner = holder(run_id)
    if owner is not None:
        require_leases(conn, [run_id], owner, what)


def require_leases(conn: sqlite3.Connection, run_ids: Sequence[str], owner: str, what: str) -> None:
    """`require_lease` of several runs that `owner` executes, in one read: for a batch of writes made on behalf of
    runs other than the calling task's own (a lane batch runs in its first caller's context, where `holder` knows
    only that caller's run). Raises `LeaseLost` naming the first run held elsewhere."""
    if not run_ids:
        return
    ids = sorted(set(run_ids))  # PostgreSQL locks in id order: two batches must not lock crosswise
    lock = " FOR UPDATE" if backend(conn) == "postgres" else ""
    rows = conn.execute(
        f"SELECT id, status, lease_owner FROM runs WHERE id IN ({','.join('?' * len(ids))}) ORDER BY id{lock}", ids
    ).fetchall()
    for row in rows:
        if held_elsewhere(row, owner):
            run_id, status, held_by = row
            logger.warning("Run %s is %s by %s, not %s: its %s is dropped", run_id, status, held_by, owner, what)
            raise LeaseLost(f"Run {run_id} is no longer executed by this engine; its {what} was dropped.")


class RunLeases:
    """The lease side of `RunStore` (it supplies `db`)."""

    db: Database

    def sweep_dead_owners(self) -> list[str]:
        """Requeue the claimed/running runs whose lease owner is gone; every engine calls it periodically. One
        indexed read of the owners when all are alive (`runs_dispatch` starts with status); a write only when one
        is dead, rechecked inside it."""
        with self.db.reading() as conn:
            owners = {
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT lease_owner FROM runs WHERE status IN ('claimed', 'running') "
                    "AND lease_owner IS NOT NULL"
                ).fetchall()
            }
            if not owners or not owners - instances.alive(conn, owners):
                return []
        with self.db.transaction() as conn:
            dead = sorted(owners - instances.alive(conn, owners))
            if not dead:
                return []
            rows = conn.execute(
                "UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
                f"WHERE status IN ('claimed', 'running') AND lease_owner IN ({', '.join('?' for _ in dead)}) "
                "RETURNING id",
                (now_ms(), *dead),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def sweep_at_boot(self, live: Collection[str] | None = None) -> list[str]:
        """Requeue every claimed/running run whose holder is gone: its lease owner is none of the `live` instances
        (read from `instances` when not given; see `store/instances.py`). Those rows were left by a crash or a
        shutdown; the runs of another process still serving on this data dir are left to it. The lease is cleared;
        the attempt count is kept (the next claim adds one)."""
        with self.db.transaction() as conn:
            held = instances.alive(conn) if live is None else live
            condition, args = instances.not_in("lease_owner", held)
            rows = conn.execute(
                "UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
                f"WHERE status IN ('claimed', 'running') AND {condition} RETURNING id",
                (now_ms(), *args),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def lost_among(self, owner: str, run_ids: Collection[str]) -> list[str]:
        """Which of the runs `owner` executes it should stop: ended (another process canceled one), or held by
        another engine now (a takeover while `owner` was paused)."""
        ids = sorted(run_ids)
        if not ids:
            return []
        with self.db.reading() as conn:
            rows = conn.execute(
                f"SELECT id FROM runs WHERE id IN ({', '.join('?' for _ in ids)}) "
                "AND (status IN ('succeeded', 'failed', 'canceled') "
                "OR (status IN ('claimed', 'running') AND lease_owner != ?))",
                (*ids, owner),
            ).fetchall()
        return [str(r[0]) for r in rows]


__all__ = [
    "LeaseLost",
    "RunLeases",
    "executing",
    "held_elsewhere",
    "holder",
    "released",
    "require_lease",
    "require_leases",
]
