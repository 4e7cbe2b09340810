"""The waits scripts register while parked on `ctx.wait_for_event` (HARNESS §9.5), for deliveries to find.

A row says: run R's wait W (journaled at `callSeq`/`key`) accepts a named signal, any signal, or activity matching
`eventType`/`resource`/`author`. Rows are written with the park that makes them true and deleted by the delivery
that wakes the run, by the next park (which writes the waits still open) and by the run's terminal commit. A row
whose run is no longer `waiting` (its timeout requeued it) is stale until then: deliveries only look at rows of
waiting runs. Every function takes the caller's connection, inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import cbor2

from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Connection

MatchKind = Literal["signal", "any", "activity"]


def migrate(conn: Connection) -> None:
    """Create this store's schema (m016_run_waits)."""
    conn.execute(
        """
        CREATE TABLE run_waits (
            run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            wait_id TEXT NOT NULL,
            account_id TEXT NOT NULL,
            call_seq INTEGER NOT NULL,
            key TEXT NOT NULL,
            match_kind TEXT NOT NULL CHECK (match_kind IN ('signal', 'any', 'activity')),
            signal TEXT,
            match_cbor BLOB NOT NULL,
            timeout_at INTEGER,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (run_id, wait_id)
        ) WITHOUT ROWID
        """
    )
    conn.execute("CREATE INDEX run_waits_by_signal ON run_waits (account_id, match_kind, signal, created_at)")
    conn.execute("CREATE INDEX run_waits_for_activity ON run_waits (created_at) WHERE match_kind = 'activity'")


@dataclass(frozen=True, slots=True)
class WaitRow:
    """One registered wait: what it accepts and where its journal group is."""

    run_id: str
    wait_id: str
    call_seq: int
    key: str
    match: dict[str, Any]
    timeout_at: int | None = None

    @property
    def kind(self) -> MatchKind:
        if "signal" in self.match:
            return "signal"
        return "activity" if self.match else "any"


def replace(conn: Connection, run_id: str, account_id: str, waits: Iterable[WaitRow]) -> None:
    """The run's registered waits become exactly `waits` (those its park leaves open)."""
    clear(conn, run_id)
    ts = now_ms()
    conn.executemany(
        "INSERT INTO run_waits (run_id, wait_id, account_id, call_seq, key, match_kind, signal, match_cbor, "
        "timeout_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run_id,
                w.wait_id,
                account_id,
                w.call_seq,
                w.key,
                w.kind,
                w.match.get("signal"),
                cbor2.dumps(w.match, canonical=True),
                w.timeout_at,
                ts,
            )
            for w in waits
        ],
    )


def clear(conn: Connection, run_id: str) -> None:
    conn.execute("DELETE FROM run_waits WHERE run_id = ?", (run_id,))


def for_signal(
    conn: Connection, account_id: str, run_id: str | None, signal: str, agent_id: str | None = None
) -> list[WaitRow]:
    """Waits of waiting runs (of `run_id`, of `agent_id`'s runs, or of the account's) that accept `signal` (a wait
    naming it, or one naming none), oldest first."""
    sql = (
        "SELECT w.* FROM run_waits w JOIN runs r ON r.id = w.run_id WHERE w.account_id = ? AND r.status = 'waiting' "
        "AND (w.match_kind = 'any' OR (w.match_kind = 'signal' AND w.signal = ?))"
    )
    args: list[Any] = [account_id, signal]
    if run_id is not None:
        sql += " AND w.run_id = ?"
        args.append(run_id)
    if agent_id is not None:
        sql += " AND r.agent_id = ?"
        args.append(agent_id)
    return _rows(conn, sql + " ORDER BY w.created_at, w.run_id, w.call_seq", args)


def for_activity(conn: Connection) -> list[WaitRow]:
    """Activity waits of waiting runs, oldest first (the caller applies the matcher)."""
    sql = (
        "SELECT w.* FROM run_waits w JOIN runs r ON r.id = w.run_id WHERE w.match_kind = 'activity' "
        "AND r.status = 'waiting' ORDER BY w.created_at, w.run_id, w.call_seq"
    )
    return _rows(conn, sql, [])


def of_run(conn: Connection, run_id: str) -> list[WaitRow]:
    return _rows(conn, "SELECT * FROM run_waits WHERE run_id = ? ORDER BY call_seq", [run_id])


def _rows(conn: Connection, sql: str, args: list[Any]) -> list[WaitRow]:
    return [
        WaitRow(
            run_id=row["run_id"],
            wait_id=row["wait_id"],
            call_seq=int(row["call_seq"]),
            key=row["key"],
            match=cbor2.loads(row["match_cbor"]),
            timeout_at=row["timeout_at"],
        )
        for row in conn.execute(sql, args).fetchall()
    ]


__all__ = ["MatchKind", "WaitRow", "clear", "for_activity", "for_signal", "migrate", "of_run", "replace"]
