"""Claiming runs from the queue: what is due, where a queued run stands, and taking a batch under the limits.

Split from runs.py (the rest of a run's life: enqueue, park, settle, cancel, usage) so each stays readable; the
`RunStore` is one class over both. A claim pass reads its candidates once and updates them in one statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import cbor2

from mcp_harness.runs.records import RunRecord
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database


def load_cbor(blob: bytes | None) -> Any:
    return None if blob is None else cbor2.loads(blob)


def dump_cbor(value: Any) -> bytes | None:
    return None if value is None else cbor2.dumps(value, canonical=True)


def run_record(row: sqlite3.Row) -> RunRecord:
    # Reading a row by name scans its column names each time: 34 such reads were a quarter of decoding a run, and a
    # fan-out decodes two or three runs per child. One dict of the row instead.
    return run_record_of(row_dict(row))


def row_dict(row: sqlite3.Row) -> dict[str, Any]:
    """The row's columns by name, as `run_record_of` takes them."""
    return dict(zip(row.keys(), row, strict=True))


def run_record_of(r: dict[str, Any]) -> RunRecord:
    """A run's columns by name (`row_dict`, perhaps with some changed) decoded into its record."""
    return RunRecord(
        id=r["id"],
        account_id=r["account_id"],
        root_run_id=r["root_run_id"],
        parent_run_id=r["parent_run_id"],
        parent_tool_call_id=r["parent_tool_call_id"],
        continued_from_run_id=r["continued_from_run_id"],
        depth=r["depth"],
        kind=r["kind"],
        agent_id=r["agent_id"],
        session_id=r["session_id"],
        origin=r["origin"],
        title=r["title"],
        model=r["model"],
        status=r["status"],
        input=load_cbor(r["input_cbor"]) or {},
        output=load_cbor(r["output_cbor"]),
        error=load_cbor(r["error_cbor"]),
        wait=load_cbor(r["wait_cbor"]),
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        not_before=r["not_before"],
        queue=r["queue"],
        lease_owner=r["lease_owner"],
        lease_expires_at=r["lease_expires_at"],
        usage=load_cbor(r["usage_cbor"]),
        plan=load_cbor(r["plan_cbor"]),
        created_at=r["created_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        updated_at=r["updated_at"],
        trigger_firing_id=r["trigger_firing_id"],
        source_cid=r["source_cid"],
        source_text=r["source_text"],
        budget=load_cbor(r["budget_cbor"]),
    )


CANDIDATES_PER_SLOT = 4
CANDIDATES_SLACK = 16
"""A claim pass reads (and on PostgreSQL row-locks) at most this many candidates per free slot, not the whole due
queue: a backlog of thousands costs a pass what a short queue does. Nothing starves: a kind with no free slot is
not read, and the only candidates a pass passes over are a second turn of a session it just chose, which the next
pass excludes by that session's live turn."""


class RunClaims:
    """The queue side of `RunStore` (it supplies `db`)."""

    db: Database

    @property
    def fleet(self) -> bool:
        """Whether the database is shared by a fleet (PostgreSQL): claims then count live runs from the database and
        take their candidates `FOR UPDATE SKIP LOCKED`, outside the writers' lock (`PgDatabase.claiming`)."""
        return getattr(self.db, "backend", "sqlite") == "postgres"

    @contextmanager
    def _claiming(self) -> Iterator[sqlite3.Connection]:
        if self.fleet:
            with self.db.claiming() as conn:  # pyright: ignore[reportAttributeAccessIssue]
                yield conn
        else:
            with self.db.transaction() as conn:  # SQLite's write lock serializes the claim, as ever
                yield conn

    def wake_hint(self) -> None:
        """In the caller's transaction: tell the fleet's idle engines that a run is due (a hint, sent at commit; on
        SQLite nothing: one process's engine is woken by its own `wake()`, another's by its poll)."""
        if self.fleet:
            self.db.notify("harness_runs", "")  # pyright: ignore[reportAttributeAccessIssue]

    def hear_runs(self, wake: Callable[[], None]) -> Callable[[], None]:
        """On PostgreSQL, call `wake()` whenever a replica sends `wake_hint` (listening from now on, until the
        returned function is called). On SQLite nothing: returns a no-op. Blocking."""
        if not self.fleet:
            return lambda: None
        return self.db.on_notify("harness_runs", wake)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownVariableType]

    def pending(self) -> tuple[bool, bool, int | None]:
        """What a pump pass has to do, read without taking the write lock: whether a waiting run's timer is due,
        whether a queued run is due (it may still be blocked by its session's live turn), and `next_due_at()`."""
        ts = now_ms()
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'waiting' AND not_before IS NOT NULL "
                "AND not_before <= ?), EXISTS (SELECT 1 FROM runs WHERE status = 'queued' "
                "AND (not_before IS NULL OR not_before <= ?)), (SELECT MIN(not_before) FROM runs "
                "WHERE status IN ('queued', 'waiting') AND not_before IS NOT NULL)",
                (ts, ts),
            ).fetchone()
        return bool(row[0]), bool(row[1]), None if row[2] is None else int(row[2])

    def next_due_at(self) -> int | None:
        """The earliest `not_before` among queued and waiting runs: when the pump next has timed work."""
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT MIN(not_before) FROM runs WHERE status IN ('queued', 'waiting') AND not_before IS NOT NULL"
            ).fetchone()
        return None if row[0] is None else int(row[0])

    def queue_place(self, run: RunRecord) -> tuple[int, int, bool]:
        """Why a queued run has not started, in one read: how many runs of its kind are live (claimed or running),
        how many due queued runs of its kind come before it in claim order, and whether its session already has a
        live turn (an agent run then waits for that turn whatever the limit)."""
        interactive = 1 if run.queue == "interactive" else 0
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT (SELECT COUNT(*) FROM runs WHERE kind = ? AND status IN ('claimed', 'running')),"
                " (SELECT COUNT(*) FROM runs r WHERE r.kind = ? AND r.status = 'queued' AND r.id != ?"
                "  AND (r.not_before IS NULL OR r.not_before <= ?)"
                # Integers, not booleans: PostgreSQL has no `boolean > integer`.
                "  AND (CASE WHEN r.queue = 'interactive' THEN 1 ELSE 0 END > ?"
                "  OR (CASE WHEN r.queue = 'interactive' THEN 1 ELSE 0 END = ?"
                "  AND (r.created_at, r.id) < (?, ?)))),"
                " ? IS NOT NULL AND EXISTS (SELECT 1 FROM runs o WHERE o.session_id = ?"
                "  AND o.status IN ('claimed', 'running'))",
                (
                    run.kind,
                    run.kind,
                    run.id,
                    now_ms(),
                    interactive,
                    interactive,
                    run.created_at,
                    run.id,
                    run.session_id if run.kind == "agent" else None,
                    run.session_id,
                ),
            ).fetchone()
        return int(row[0]), int(row[1]), bool(row[2])

    # -- dispatch --------------------------------------------------------------------------------------------------

    def claim_next(
        self, owner: str, *, kinds: Iterable[str], lease_ms: int = 60_000, exclude: Collection[str] = ()
    ) -> RunRecord | None:
        """Atomically claim the next due queued run of an allowed kind: interactive before background, then oldest.

        An agent run whose session already has a claimed or running run is skipped, so a session has one live
        turn at a time. `exclude` names runs whose previous execution is still winding down in this process.
        Claiming sets the lease and counts an attempt.
        """
        with self.db.transaction() as conn:
            row = self._claim(conn, owner, kinds, lease_ms, exclude, start=False)
        return None if row is None else run_record(row)

    def claim_batch(
        self,
        owner: str,
        free: Mapping[str, int],
        *,
        lease_ms: int = 60_000,
        exclude: Collection[str] = (),
        limits: Mapping[str, int] | None = None,
    ) -> list[RunRecord]:
        """Claim up to `free[kind]` runs of each kind, in `claim_next` order, and mark them running, all in one
        transaction: a pump pass's claims commit together or not at all (so none is left 'claimed' unstarted).
        `limits` (a fleet's): at most `limits[kind]` claimed or running in the whole database, counted in the claim.
        """
        left = {kind: n for kind, n in free.items() if n > 0}
        if not left:
            return []
        ts = now_ms()
        kinds = sorted(left)
        skip = sorted(exclude)
        skip_sql = f" AND r.id NOT IN ({', '.join('?' for _ in skip)})" if skip else ""
        lock = " FOR UPDATE OF r SKIP LOCKED" if self.fleet else ""
        with self._claiming() as conn:
            if limits is not None:
                # Counted under the claim lock: every move into claimed/running is a claim, so the count is exact.
                live = conn.execute(
                    "SELECT kind, COUNT(*) FROM runs WHERE status IN ('claimed', 'running') "
                    f"AND kind IN ({', '.join('?' for _ in kinds)}) GROUP BY kind",
                    kinds,
                ).fetchall()
                for kind, n in live:
                    left[kind] = min(left[kind], limits.get(kind, left[kind]) - int(n))
                if not any(n > 0 for n in left.values()):
                    return []
                # A kind at its fleet limit is not read at all: its queue would fill the candidates' LIMIT.
                kinds = [kind for kind in kinds if left[kind] > 0]
            # One read of the candidates in claim order and one update of the chosen, rather than one claim
            # statement (each sorting the whole queue again) per run: a fan-out's hundred children are claimed in
            # one pass. The choice is `claim_next`'s, repeated: a kind's free slots, and one live turn per session
            # (the statement's EXISTS covers turns already live; `sessions` covers the ones chosen here).
            candidates = conn.execute(
                "SELECT r.id, r.kind, r.session_id FROM runs r WHERE r.status = 'queued'"
                f" AND (r.not_before IS NULL OR r.not_before <= ?) AND r.kind IN ({', '.join('?' for _ in kinds)})"
                f"{skip_sql} AND NOT (r.kind = 'agent' AND r.session_id IS NOT NULL AND EXISTS ("
                "  SELECT 1 FROM runs o WHERE o.session_id = r.session_id AND o.status IN ('claimed', 'running')))"
                f" ORDER BY r.queue = 'interactive' DESC, r.created_at, r.id LIMIT ?{lock}",
                (ts, *kinds, *skip, CANDIDATES_PER_SLOT * sum(max(n, 0) for n in left.values()) + CANDIDATES_SLACK),
            ).fetchall()
            chosen: list[str] = []
            sessions: set[str] = set()
            for run_id, kind, session_id in candidates:
                if left[kind] <= 0:
                    continue
                if kind == "agent" and session_id is not None:
                    if session_id in sessions:
                        continue
                    sessions.add(session_id)
                chosen.append(run_id)
                left[kind] -= 1
                if not any(n > 0 for n in left.values()):
                    break
            if not chosen:
                return []
            rows = conn.execute(
                "UPDATE runs SET status = 'running', started_at = COALESCE(started_at, ?), lease_owner = ?, "
                "lease_expires_at = ?, attempt = attempt + 1, not_before = NULL, updated_at = ? "
                f"WHERE id IN ({', '.join('?' for _ in chosen)}) RETURNING *",
                (ts, owner, ts + lease_ms, ts, *chosen),
            ).fetchall()
        by_id = {row["id"]: run_record(row) for row in rows}
        return [by_id[run_id] for run_id in chosen]

    @staticmethod
    def _claim(
        conn: sqlite3.Connection,
        owner: str,
        kinds: Iterable[str],
        lease_ms: int,
        exclude: Collection[str],
        *,
        start: bool,
    ) -> sqlite3.Row | None:
        """The claim statement; with `start`, the row goes straight to 'running' (`mark_running` folded in)."""
        allowed = sorted(set(kinds))
        if not allowed:
            return None
        ts = now_ms()
        marks = ", ".join("?" for _ in allowed)
        skip = sorted(exclude)
        skip_sql = f" AND r.id NOT IN ({', '.join('?' for _ in skip)})" if skip else ""
        status = "status = 'running', started_at = COALESCE(started_at, ?)" if start else "status = 'claimed'"
        started = (ts,) if start else ()
        return conn.execute(
            f"UPDATE runs SET {status}, lease_owner = ?, lease_expires_at = ?, attempt = attempt + 1, "
            "not_before = NULL, updated_at = ? WHERE id = ("
            " SELECT r.id FROM runs r WHERE r.status = 'queued' AND (r.not_before IS NULL OR r.not_before <= ?)"
            f" AND r.kind IN ({marks}){skip_sql}"
            " AND NOT (r.kind = 'agent' AND r.session_id IS NOT NULL AND EXISTS ("
            "  SELECT 1 FROM runs o WHERE o.session_id = r.session_id AND o.status IN ('claimed', 'running')))"
            " ORDER BY r.queue = 'interactive' DESC, r.created_at, r.id LIMIT 1"
            ") RETURNING *",
            (*started, owner, ts + lease_ms, ts, ts, *allowed, *skip),
        ).fetchone()
