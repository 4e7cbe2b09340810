"""Durable runs: the queue, claims, parking, retries, cancellation and usage roll-up (HARNESS §8).

Every method blocks on SQLite; the engine calls them off the event loop. Changes that must agree with each other
(a terminal commit and its parent's usage roll-up, a whole cancelled tree) happen in one transaction. What a run
executes is not this module's business: it only records where each run stands.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import cbor2

from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.runs.outcomes import Canceled, Failed, Outcome, Parked, Succeeded
from mcp_harness.runs.policy import (
    RETRY_BASE_MS,
    RETRY_CAP_MS,
)
from mcp_harness.runs.records import LIVE, TERMINAL, RunKind, RunOrigin, RunQueue, RunRecord, RunStatus, continued_as
from mcp_harness.store._util import new_id, now_ms
from mcp_harness.store.batch import insert_rows
from mcp_harness.store.db import Database
from mcp_harness.store.run_claims import RunClaims, dump_cbor, load_cbor, run_record
from mcp_harness.store.run_leases import RunLeases, require_lease
from mcp_harness.store.run_settle import RunSettle, locked

logger = logging.getLogger(__name__)

_LIVE_SQL = "('queued', 'claimed', 'running', 'waiting')"
_KINDS, _ORIGINS, _QUEUES = get_args(RunKind), get_args(RunOrigin), get_args(RunQueue)
"""What `enqueue` accepts, read off the literals once (a fan-out's spawn checks a hundred runs)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NewRun:
    """A run for `enqueue_many` to queue: what a spawned child needs of `enqueue`'s arguments."""

    id: str
    account_id: str
    title: str
    origin: str
    kind: str = "agent"
    agent_id: str | None = None
    session_id: str | None = None
    input: dict[str, Any] = field(default_factory=dict[str, Any])
    parent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    queue: str = "background"
    max_attempts: int = 1


def _check(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise BadRequest(f"Unknown run {what} {value!r}; use one of: {', '.join(allowed)}.")


class RunStore(RunClaims, RunLeases, RunSettle):
    """The `runs` table: enqueue, claim, park, finalize, cancel, account usage. Methods block on SQLite.

    `retry_base_ms`/`retry_cap_ms` shape the backoff of retryable failures (tests shrink them).
    """

    def __init__(self, db: Database, *, retry_base_ms: int = RETRY_BASE_MS, retry_cap_ms: int = RETRY_CAP_MS) -> None:
        self.db = db
        self.retry_base_ms = retry_base_ms
        self.retry_cap_ms = retry_cap_ms

    # -- enqueue and lookups -------------------------------------------------------------------------------------

    def enqueue(
        self,
        *,
        account_id: str,
        kind: str = "agent",
        title: str,
        origin: str,
        agent_id: str | None = None,
        session_id: str | None = None,
        input: dict[str, Any] | None = None,
        parent_run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        queue: str = "background",
        max_attempts: int = 1,
        run_id: str | None = None,
        model: str | None = None,
        continued_from_run_id: str | None = None,
        trigger_firing_id: str | None = None,
        budget: dict[str, Any] | None = None,
        source_text: str | None = None,
        source_cid: str | None = None,
    ) -> RunRecord:
        """Queue a run. A child inherits its parent's root and sits one level deeper. Supplying an existing
        `run_id` is a no-op that returns that row, so deterministic ids make enqueue idempotent.

        Raises:
            BadRequest: the title is blank, `kind`/`origin`/`queue` is unknown, or `max_attempts` < 1.
            NotFound: `parent_run_id` names no run.
        """
        clean = title.strip()
        if not clean:
            raise BadRequest("A run needs a non-empty title.")
        _check("kind", kind, _KINDS)
        _check("origin", origin, _ORIGINS)
        _check("queue", queue, _QUEUES)
        if max_attempts < 1:
            raise BadRequest(f"max_attempts must be at least 1, not {max_attempts}.")
        rid = run_id or new_id()
        ts = now_ms()
        with self.db.transaction() as conn:
            existing = conn.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()
            if existing is not None:
                return run_record(existing)
            root, depth = rid, 0
            if parent_run_id is not None:
                parent = conn.execute("SELECT root_run_id, depth FROM runs WHERE id = ?", (parent_run_id,)).fetchone()
                if parent is None:
                    raise NotFound(f"No run {parent_run_id}.")
                root, depth = parent["root_run_id"], parent["depth"] + 1
            row = conn.execute(
                "INSERT INTO runs (id, account_id, root_run_id, parent_run_id, parent_tool_call_id, "
                "continued_from_run_id, depth, kind, agent_id, session_id, trigger_firing_id, origin, title, model, "
                "input_cbor, status, max_attempts, queue, budget_cbor, source_text, source_cid, created_at, "
                "updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?) RETURNING *",
                (
                    rid,
                    account_id,
                    root,
                    parent_run_id,
                    parent_tool_call_id,
                    continued_from_run_id,
                    depth,
                    kind,
                    agent_id,
                    session_id,
                    trigger_firing_id,
                    origin,
                    clean,
                    model,
                    dump_cbor(input or {}),
                    max_attempts,
                    queue,
                    dump_cbor(budget),
                    source_text,
                    source_cid,
                    ts,
                    ts,
                ),
            ).fetchone()
            self.wake_hint()
        return run_record(row)

    def enqueue_many(self, new: Sequence[NewRun]) -> None:
        """Queue several runs in one statement batch (a reply's children): `enqueue`'s checks and rules, each
        parent read once. An id already queued is left as it is, as `enqueue` leaves it.

        Raises:
            BadRequest: a title is blank, a kind/origin/queue is unknown, or a `max_attempts` < 1.
            NotFound: a `parent_run_id` names no run.
        """
        for run in new:
            if not run.title.strip():
                raise BadRequest("A run needs a non-empty title.")
            _check("kind", run.kind, _KINDS)
            _check("origin", run.origin, _ORIGINS)
            _check("queue", run.queue, _QUEUES)
            if run.max_attempts < 1:
                raise BadRequest(f"max_attempts must be at least 1, not {run.max_attempts}.")
        if not new:
            return
        ts = now_ms()
        with self.db.transaction() as conn:
            marks = ", ".join("?" for _ in new)
            existing = {r[0] for r in conn.execute(f"SELECT id FROM runs WHERE id IN ({marks})", [n.id for n in new])}
            parents: dict[str, tuple[str, int]] = {}
            for pid in {n.parent_run_id for n in new if n.parent_run_id is not None}:
                row = conn.execute("SELECT root_run_id, depth FROM runs WHERE id = ?", (pid,)).fetchone()
                if row is None:
                    raise NotFound(f"No run {pid}.")
                parents[pid] = (row["root_run_id"], row["depth"] + 1)
            rows = [
                (
                    n.id,
                    n.account_id,
                    *(parents[n.parent_run_id] if n.parent_run_id is not None else (n.id, 0)),
                    n.parent_run_id,
                    n.parent_tool_call_id,
                    n.kind,
                    n.agent_id,
                    n.session_id,
                    n.origin,
                    n.title.strip(),
                    dump_cbor(n.input),
                    n.max_attempts,
                    n.queue,
                    ts,
                    ts,
                )
                for n in new
                if n.id not in existing
            ]
            insert_rows(
                conn,
                "INSERT INTO runs (id, account_id, root_run_id, depth, parent_run_id, parent_tool_call_id, kind, "
                "agent_id, session_id, origin, title, input_cbor, status, max_attempts, queue, created_at, updated_at) "
                "VALUES",
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                rows,
            )
            if rows:
                self.wake_hint()

    # -- the script journal (HARNESS §9.3) ---------------------------------------------------------------------

    def journal(self, run_id: str) -> list[dict[str, Any]]:
        """A script run's journal entries, in append order."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT entry_cbor FROM run_journal WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [cbor2.loads(row[0]) for row in rows]

    def append_journal(self, run_id: str, entries: Iterable[Mapping[str, Any]]) -> int:
        """Append entries (each with `callSeq`, `kind` and usually `key`); returns the encoded bytes added."""
        added = 0
        with self.db.transaction() as conn:
            require_lease(conn, run_id, "journal entry")
            row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM run_journal WHERE run_id = ?", (run_id,)).fetchone()
            seq = int(row[0])
            for entry in entries:
                blob = cbor2.dumps(dict(entry), canonical=True)
                seq += 1
                added += len(blob)
                conn.execute(
                    "INSERT INTO run_journal (run_id, seq, call_seq, kind, key, entry_cbor, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (run_id, seq, entry["callSeq"], entry["kind"], entry.get("key"), blob, now_ms()),
                )
        return added

    def get(self, run_id: str) -> RunRecord:
        """Raises: NotFound: no such run."""
        found = self.find(run_id)
        if found is None:
            raise NotFound(f"No run {run_id}.")
        return found

    def find(self, run_id: str) -> RunRecord | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else run_record(row)

    def status_of(self, run_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """The run's status and wait, read without decoding the rest of the row (None: no such run)."""
        with self.db.reading() as conn:
            row = conn.execute("SELECT status, wait_cbor FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else (str(row[0]), load_cbor(row[1]))

    def started_by_client(self, run_id: str) -> bool:
        """Whether the run is the root an MCP client's `delegate` started (no parent run, a parent call)."""
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT parent_run_id IS NULL AND parent_tool_call_id IS NOT NULL FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
        return row is not None and bool(row[0])

    def statuses_of(self, run_ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any] | None]]:
        """`status_of` of several runs in one read (a missing run is absent)."""
        if not run_ids:
            return {}
        ids = list(dict.fromkeys(run_ids))
        with self.db.reading() as conn:
            rows = conn.execute(
                f"SELECT id, status, wait_cbor FROM runs WHERE id IN ({','.join('?' * len(ids))})", ids
            ).fetchall()
        return {str(r[0]): (str(r[1]), load_cbor(r[2])) for r in rows}

    def started_by_client_among(self, run_ids: Sequence[str]) -> set[str]:
        """Which of the runs `started_by_client` is true of, in one read."""
        if not run_ids:
            return set()
        ids = list(dict.fromkeys(run_ids))
        with self.db.reading() as conn:
            rows = conn.execute(
                f"SELECT id FROM runs WHERE id IN ({','.join('?' * len(ids))}) "
                "AND parent_run_id IS NULL AND parent_tool_call_id IS NOT NULL",
                ids,
            ).fetchall()
        return {str(r[0]) for r in rows}

    def chain_end(self, run_id: str) -> RunRecord:
        """The run, or the last successor of the `ctx.continue_as_new` chain it starts: the one that answers.

        Raises:
            NotFound: no such run.
        """
        record = self.get(run_id)
        while (successor := continued_as(record)) is not None:
            record = self.get(successor)
        return record

    def children(self, run_id: str) -> list[RunRecord]:
        """Direct children, oldest first."""
        return self._select("SELECT * FROM runs WHERE parent_run_id = ? ORDER BY created_at, id", (run_id,))

    def count_children(self, run_id: str) -> int:
        with self.db.reading() as conn:
            row = conn.execute("SELECT COUNT(*) FROM runs WHERE parent_run_id = ?", (run_id,)).fetchone()
        return int(row[0])

    def live_on_session(self, session_id: str) -> list[RunRecord]:
        """Queued, claimed, running and waiting runs on the session, oldest first."""
        return self._select(
            f"SELECT * FROM runs WHERE session_id = ? AND status IN {_LIVE_SQL} ORDER BY created_at, id", (session_id,)
        )

    def waiting_on_children(self) -> list[RunRecord]:
        """Runs parked until their children resolve, for the agent layer to reconcile at boot."""
        parked = self._select("SELECT * FROM runs WHERE status = 'waiting' ORDER BY created_at, id", ())
        return [r for r in parked if (r.wait or {}).get("reason") == "children"]

    def mark_running(self, run_id: str, owner: str | None = None) -> RunRecord | None:
        """Claimed → running; `started_at` keeps the first start across retries and resumes. None if not claimed
        (by `owner`, when given)."""
        ts = now_ms()
        mine, args = ("", ()) if owner is None else (" AND lease_owner = ?", (owner,))
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE runs SET status = 'running', started_at = COALESCE(started_at, ?), updated_at = ? "
                f"WHERE id = ? AND status IN ('claimed', 'running'){mine} RETURNING *",
                (ts, ts, run_id, *args),
            ).fetchone()
        return None if row is None else run_record(row)

    # -- waiting ---------------------------------------------------------------------------------------------------

    def park(self, run_id: str, wait: dict[str, Any]) -> RunRecord:
        """Park a live run until it is requeued (or its timer/timeout passes). A terminal run is left alone."""
        with self.db.transaction() as conn:
            require_lease(conn, run_id, "park")
            return self._park(conn, self._row(conn, run_id), wait)

    def requeue(self, run_id: str) -> bool:
        """Waiting → queued with the wait cleared. False when the run is not waiting."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'queued', wait_cbor = NULL, not_before = NULL, updated_at = ? "
                "WHERE id = ? AND status = 'waiting'",
                (now_ms(), run_id),
            )
            if cur.rowcount > 0:
                self.wake_hint()
        return cur.rowcount > 0

    def wake_due(self) -> list[str]:
        """Requeue waiting runs whose timer or event timeout has passed; returns their ids."""
        ts = now_ms()
        with self.db.transaction() as conn:
            rows = conn.execute(
                "UPDATE runs SET status = 'queued', wait_cbor = NULL, not_before = NULL, updated_at = ? "
                "WHERE status = 'waiting' AND not_before IS NOT NULL AND not_before <= ? RETURNING id",
                (ts, ts),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def set_plan(self, run_id: str, plan: dict[str, Any] | None) -> None:
        with self.db.transaction() as conn:
            require_lease(conn, run_id, "plan")
            conn.execute(
                "UPDATE runs SET plan_cbor = ?, updated_at = ? WHERE id = ?", (dump_cbor(plan), now_ms(), run_id)
            )

    # -- finalize, cancel ----------------------------------------------------------------------------------------------

    def finalize(self, run_id: str, outcome: Outcome) -> RunRecord:
        """Record what an execution produced; see `settle`."""
        return self.settle(run_id, outcome)[0]

    def cancel_tree(self, run_id: str) -> tuple[list[str], list[str]]:
        """Cancel the run and its descendants (over `parent_run_id`).

        Queued and waiting members are canceled now (first list, deepest first). Claimed and running members are
        returned in the second list: only their executor can stop them, and its finalize becomes `Canceled`.

        Raises:
            NotFound: no such run.
        """
        canceled: list[str] = []
        live: list[str] = []
        with self.db.transaction() as conn:
            self._row(conn, run_id)
            rows = conn.execute(
                "WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT r.id FROM runs r JOIN tree t "
                "ON r.parent_run_id = t.id) SELECT r.* FROM runs r JOIN tree t ON r.id = t.id "
                f"ORDER BY r.depth DESC, r.created_at, r.id{locked(conn, ' OF r')}",
                (run_id,),
            ).fetchall()
            # Deepest first, so a canceled child has rolled its usage up before its own parent rolls up in turn.
            for row in rows:
                if row["status"] in ("queued", "waiting"):
                    self._terminal(conn, row, "canceled")
                    canceled.append(row["id"])
                elif row["status"] in ("claimed", "running"):
                    live.append(row["id"])
        return canceled, live

    # -- helpers -----------------------------------------------------------------------------------------------------

    def _select(self, sql: str, args: tuple[Any, ...]) -> list[RunRecord]:
        with self.db.reading() as conn:
            return [run_record(r) for r in conn.execute(sql, args).fetchall()]


__all__ = [
    "LIVE",
    "TERMINAL",
    "NewRun",
    "Canceled",
    "Failed",
    "Outcome",
    "Parked",
    "RunKind",
    "RunOrigin",
    "RunQueue",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "Succeeded",
]
