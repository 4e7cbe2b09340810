"""The settle side of `RunStore`: outcomes recorded, runs parked, usage added (HARNESS §8).

A terminal commit is one write of the run's row (its outcome and its last reply's tokens together) and the roll-up
of its usage into its parent's, in the caller's transaction. `settle_many_within` does that for runs ending
together, as the ten leaves of a fan-out's parent do: one read of all their rows and one statement for all that
end succeeded or canceled, where each alone cost a read and a write of its own (a hundred leaves paid two hundred
statements in the store lane, one after another, between the last leaf's reply and its parent's next turn).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from mcp_harness.errors import NotFound
from mcp_harness.runs.outcomes import Canceled, Failed, Outcome, Parked, Succeeded
from mcp_harness.runs.policy import park_wake_at, plus, retry_delay_ms, tokens, usage_delta
from mcp_harness.runs.records import TERMINAL, RunRecord
from mcp_harness.store import dialect, run_usage
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database
from mcp_harness.store.run_claims import dump_cbor, load_cbor, row_dict, run_record, run_record_of
from mcp_harness.store.run_leases import held_elsewhere

logger = logging.getLogger(__name__)

Settlement = tuple[str, Outcome, Mapping[str, Any] | None]
"""What `settle_many_within` records for one run: its id, its outcome, its last reply's usage (or None)."""

_END = (
    "UPDATE runs SET status = ?, output_cbor = COALESCE(?, output_cbor), error_cbor = ?, wait_cbor = NULL, "
    "not_before = NULL, lease_owner = NULL, lease_expires_at = NULL, finished_at = ?, updated_at = ?, "
    "usage_cbor = COALESCE(?, usage_cbor) WHERE id = ?"
)


def locked(conn: sqlite3.Connection, of: str = "") -> str:
    """`FOR UPDATE` on PostgreSQL, where claims run beside the writers (run_claims.py): a row read to decide a write
    is the row as a concurrent claim left it. SQLite's one writer needs nothing."""
    return f" FOR UPDATE{of}" if dialect.backend(conn) == "postgres" else ""


class RunSettle:
    """Outcomes, parks and usage of `RunStore` (which supplies `db` and the retry backoff)."""

    db: Database
    retry_base_ms: int
    retry_cap_ms: int

    def settle(
        self,
        run_id: str,
        outcome: Outcome,
        *,
        retry_base_ms: int | None = None,
        retry_cap_ms: int | None = None,
        usage: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> tuple[RunRecord, bool]:
        """Record an outcome; the flag says whether this call made the run terminal (so hooks fire once). `usage`
        (the tokens of the execution's last reply) is added as `add_usage` would, in the same write: a terminal
        commit carries it in its own update, so a run's last reply costs one write of its row, not two.

        An outcome for a terminal run is discarded: a cancel that landed mid-execution sticks. `Parked` only parks
        a claimed/running row (the execution's own state); a row already waiting or requeued is left as it is.
        A retryable failure
        with attempts left goes back to the queue after a backoff, keeping its error. A terminal commit rolls the
        run's usage into its parent's `children` block in the same transaction. With `owner` (an execution's own
        outcome) the outcome is dropped, and logged, unless the row is still live under that lease (run_leases.py).

        Raises:
            NotFound: no such run.
        """
        with self.db.transaction() as conn:
            return self.settle_within(
                conn, run_id, outcome, retry_base_ms=retry_base_ms, retry_cap_ms=retry_cap_ms, usage=usage, owner=owner
            )

    def settle_within(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        outcome: Outcome,
        *,
        retry_base_ms: int | None = None,
        retry_cap_ms: int | None = None,
        usage: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> tuple[RunRecord, bool]:
        """`settle` in the caller's transaction (`conn`), without a savepoint of its own: for the engine, whose
        terminal commit wraps it with the terminal effects and fails whole."""
        if not conn.in_transaction:
            raise RuntimeError("settle_within needs the caller's open transaction.")
        return self._settle_row(
            conn, self._row(conn, run_id), outcome, usage, owner, retry_base_ms=retry_base_ms, retry_cap_ms=retry_cap_ms
        )

    def settle_many_within(
        self,
        conn: sqlite3.Connection,
        items: Sequence[Settlement],
        *,
        retry_base_ms: int | None = None,
        retry_cap_ms: int | None = None,
        owner: str | None = None,
    ) -> list[tuple[RunRecord, bool]]:
        """`settle_within` of several runs, in order, each as it alone would be settled: their rows read in one
        statement, and the ones ending succeeded or canceled written in one more (the others one by one, as
        `settle_within` writes them).

        Raises:
            NotFound: one of the runs does not exist (nothing was written).
        """
        if not conn.in_transaction:
            raise RuntimeError("settle_many_within needs the caller's open transaction.")
        ids = [run_id for run_id, _, _ in items]
        if len(set(ids)) < len(ids):  # the second of a run's settles must see the first's write
            backoff = {"retry_base_ms": retry_base_ms, "retry_cap_ms": retry_cap_ms}
            return [self.settle_within(conn, i, o, usage=u, owner=owner, **backoff) for i, o, u in items]
        marks = ",".join("?" * len(ids))
        # In id order: PostgreSQL locks the rows as it reads them, and two such batches must not lock crosswise.
        rows = {
            r["id"]: r for r in conn.execute(f"SELECT * FROM runs WHERE id IN ({marks}) ORDER BY id{locked(conn)}", ids)
        }
        if missing := [run_id for run_id in ids if run_id not in rows]:
            raise NotFound(f"No run {missing[0]}.")
        settled: list[tuple[RunRecord, bool] | None] = [None] * len(items)
        ending: list[tuple[int, sqlite3.Row, str, Any, Mapping[str, int] | None]] = []
        for i, (run_id, outcome, usage) in enumerate(items):
            row = rows[run_id]
            if (end := _ending(row, outcome, owner)) is not None:
                ending.append((i, row, *end, usage_delta(usage) if usage else None))
                continue
            settled[i] = self._settle_row(
                conn, row, outcome, usage, owner, retry_base_ms=retry_base_ms, retry_cap_ms=retry_cap_ms
            )
        if ending:
            ts = now_ms()
            writes = [_ended(row, status, output, None, delta, ts) for _, row, status, output, delta in ending]
            conn.executemany(_END, [params for params, _ in writes])
            for (i, *_), (_, record) in zip(ending, writes, strict=True):
                _rolled_up(conn, record)
                settled[i] = (record, True)
        return [s for s in settled if s is not None]  # every one is set: each item either ends here or settled alone

    def _settle_row(
        self,
        conn: sqlite3.Connection,
        row: sqlite3.Row,
        outcome: Outcome,
        usage: Mapping[str, Any] | None,
        owner: str | None,
        *,
        retry_base_ms: int | None,
        retry_cap_ms: int | None,
    ) -> tuple[RunRecord, bool]:
        run_id = row["id"]
        delta = usage_delta(usage) if usage else None
        if (end := _ending(row, outcome, owner)) is not None:
            return self._terminal(conn, row, end[0], output=end[1], delta=delta), True
        if delta is not None:  # not a terminal write of ours: the usage goes on its own
            row = self._add_usage(conn, row, delta)
        lost = owner is not None and held_elsewhere(row, owner)
        if row["status"] in TERMINAL:
            return run_record(row), False
        if lost:  # another engine took the run over: it decides now
            state, holder = row["status"], row["lease_owner"]
            logger.warning("Run %s is %s by %s, not %s: its outcome is dropped", run_id, state, holder, owner)
            return run_record(row), False
        if isinstance(outcome, Parked):
            if row["status"] not in ("claimed", "running"):
                # The executor parked the row itself and a child already requeued it (or it is waiting):
                # parking again would lose that wake-up.
                return run_record(row), False
            return self._park(conn, row, outcome.wait), False
        assert isinstance(outcome, Failed)  # a success or cancel either ended the run above or met a row not ours
        error = outcome.to_error()
        if outcome.retryable and row["attempt"] < row["max_attempts"]:
            ts = now_ms()
            delay = retry_delay_ms(
                row["attempt"],
                base_ms=self.retry_base_ms if retry_base_ms is None else retry_base_ms,
                cap_ms=self.retry_cap_ms if retry_cap_ms is None else retry_cap_ms,
            )
            again = conn.execute(
                "UPDATE runs SET status = 'queued', error_cbor = ?, wait_cbor = NULL, not_before = ?, "
                "lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ? RETURNING *",
                (dump_cbor(error), ts + delay, ts, run_id),
            ).fetchone()
            return run_record(again), False
        return self._terminal(conn, row, "failed", error=error), True

    def add_usage(self, run_id: str, usage: Mapping[str, Any]) -> None:
        """Add spent tokens to the run's own counters. Counters accumulate across turns, retries and resumes.

        Raises:
            NotFound: no such run.
        """
        delta = usage_delta(usage)
        with self.db.transaction() as conn:
            self._add_usage(conn, self._row(conn, run_id), delta)

    def _add_usage(self, conn: sqlite3.Connection, row: sqlite3.Row, delta: Mapping[str, int]) -> sqlite3.Row:
        """`add_usage` on a row just read; returns the row as updated."""
        current = load_cbor(row["usage_cbor"]) or {}
        updated = {**current, **plus(tokens(current), delta)}
        after = conn.execute(
            "UPDATE runs SET usage_cbor = ?, updated_at = ? WHERE id = ? RETURNING *",
            (dump_cbor(updated), now_ms(), row["id"]),
        ).fetchone()
        if row["status"] in TERMINAL and row["parent_run_id"] is not None:
            # Tokens reported after the terminal commit (a canceled turn's last response) still belong to the tree.
            run_usage.roll_up(conn, row["parent_run_id"], delta, runs=0)
        return after

    @staticmethod
    def _row(conn: sqlite3.Connection, run_id: str) -> sqlite3.Row:
        row = conn.execute(f"SELECT * FROM runs WHERE id = ?{locked(conn)}", (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"No run {run_id}.")
        return row

    @staticmethod
    def _park(conn: sqlite3.Connection, row: sqlite3.Row, wait: dict[str, Any]) -> RunRecord:
        if row["status"] in TERMINAL:
            return run_record(row)
        parked = conn.execute(
            "UPDATE runs SET status = 'waiting', wait_cbor = ?, not_before = ?, lease_owner = NULL, "
            "lease_expires_at = NULL, updated_at = ? WHERE id = ? RETURNING *",
            (dump_cbor(wait), park_wake_at(wait), now_ms(), row["id"]),
        ).fetchone()
        return run_record(parked)

    @staticmethod
    def _terminal(
        conn: sqlite3.Connection,
        row: sqlite3.Row,
        status: str,
        *,
        output: Any = None,
        error: Any = None,
        delta: Mapping[str, int] | None = None,
    ) -> RunRecord:
        params, record = _ended(row, status, output, error, delta, now_ms())
        conn.execute(_END, params)
        _rolled_up(conn, record)
        return record

    def roll_ups_grouped(self, conn: sqlite3.Connection) -> AbstractContextManager[None]:
        """Inside, in `conn`'s open transaction: terminal commits hold their roll-up into the parent's usage, and at
        the end each parent gets one, of all its children's (`run_usage.grouped`)."""
        return run_usage.grouped(conn)


def _ending(row: sqlite3.Row, outcome: Outcome, owner: str | None) -> tuple[str, Any] | None:
    """The status and output `outcome` ends the run with in a terminal write of ours: a success or cancel of a live
    row that no other engine holds. None otherwise (a failure, a park, a terminal row, a run taken over)."""
    if not isinstance(outcome, Succeeded | Canceled) or row["status"] in TERMINAL:
        return None
    if owner is not None and held_elsewhere(row, owner):
        return None
    return ("succeeded" if isinstance(outcome, Succeeded) else "canceled"), outcome.output


def _ended(
    row: sqlite3.Row, status: str, output: Any, error: Any, delta: Mapping[str, int] | None, ts: int
) -> tuple[tuple[Any, ...], RunRecord]:
    """The terminal write of `row` (the parameters of `_END`) and the record it leaves, decoded from the row as read
    with that write's columns put in, rather than read back: in the caller's transaction nothing else writes the row
    in between."""
    r = row_dict(row)
    usage = None
    if delta is not None:  # the last reply's tokens, added in this same write (see `settle`)
        current = load_cbor(r["usage_cbor"]) or {}
        usage = dump_cbor({**current, **plus(tokens(current), delta)})
    out, err = dump_cbor(output), dump_cbor(error)
    r.update(status=status, error_cbor=err, wait_cbor=None, not_before=None, lease_owner=None, lease_expires_at=None)
    r.update(finished_at=ts, updated_at=ts)
    if out is not None:  # COALESCE(?, output_cbor)
        r["output_cbor"] = out
    if usage is not None:  # COALESCE(?, usage_cbor)
        r["usage_cbor"] = usage
    return (status, out, err, ts, ts, usage, row["id"]), run_record_of(r)


def _rolled_up(conn: sqlite3.Connection, done: RunRecord) -> None:
    """A terminal run's usage, its children's included, into its parent's `children` block."""
    if done.parent_run_id is not None:
        usage = done.usage or {}
        run_usage.child_ended(conn, done.parent_run_id, plus(tokens(usage), tokens(usage.get("children"))))


__all__ = ["RunSettle", "Settlement", "locked"]
