"""The relay of 2026-07-28 `delegate` rounds between replicas (server/mrtr_relay.py): one row per open call.

A client's call lives in the memory of the replica that started it (the holder); behind a load balancer its next
round may land on another. That replica writes the round's input responses to the call's `inbox` (bumping `seq`),
the holder feeds them to its waiting turns and writes what comes next to `outbox` under the same `seq` (the next
input requests, or the outcome), and the other replica answers its round from there. The holder refreshes
`held_at` while the call is open, so a round relayed to a holder that went away is told the call is gone instead of
waiting forever. Values are JSON text; rows go when their outcome is delivered, or `STATE_TTL` after the last beat.

The other way round, a turn of the call's tree that runs on another replica (its engine claimed the run) asks the
client's model through `mrtr_relay_asks`: it writes its request there, the holder asks it in its next round as a
request of its own and writes the client's answer back, and the turn reads it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Store


def migrate(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE mrtr_relay ("
        " call_id TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " held_at INTEGER NOT NULL,"
        " seq INTEGER NOT NULL DEFAULT 0,"
        " inbox TEXT,"
        " outbox TEXT,"
        " outcome TEXT)"
    )
    conn.execute("CREATE INDEX mrtr_relay_held ON mrtr_relay (held_at)")
    conn.execute(
        "CREATE TABLE mrtr_relay_asks ("
        " ask_id TEXT PRIMARY KEY,"
        " call_id TEXT NOT NULL,"
        " run_id TEXT NOT NULL,"
        " request TEXT NOT NULL,"
        " answer TEXT)"
    )
    conn.execute("CREATE INDEX mrtr_relay_asks_call ON mrtr_relay_asks (call_id)")


@dataclass(frozen=True, slots=True)
class RelayRow:
    call_id: str
    owner: str
    held_at: int
    seq: int
    inbox: str | None
    outbox: str | None
    outcome: str | None


class RelayStore:
    """The `mrtr_relay` table. Blocking: call it off the event loop."""

    def __init__(self, db: Store) -> None:
        self.db = db

    def open(self, call_id: str, owner: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO mrtr_relay (call_id, owner, held_at) VALUES (?, ?, ?)", (call_id, owner, now_ms())
            )

    def beat(self, call_ids: list[str]) -> None:
        """The holder is alive: refresh `held_at` of its open calls."""
        if not call_ids:
            return
        marks = ", ".join("?" for _ in call_ids)
        with self.db.transaction() as conn:
            conn.execute(f"UPDATE mrtr_relay SET held_at = ? WHERE call_id IN ({marks})", (now_ms(), *call_ids))

    def get(self, call_id: str) -> RelayRow | None:
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT call_id, owner, held_at, seq, inbox, outbox, outcome FROM mrtr_relay WHERE call_id = ?",
                (call_id,),
            ).fetchone()
        return None if row is None else RelayRow(*(row[i] for i in range(7)))

    def post(self, call_id: str, inbox: Callable[[int], str]) -> int | None:
        """Put a relayed round's `inbox` (made for its seq, the next one); that seq, or None if the call is gone."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT seq FROM mrtr_relay WHERE call_id = ?", (call_id,)).fetchone()
            if row is None:
                return None
            seq = int(row[0]) + 1
            conn.execute(
                "UPDATE mrtr_relay SET seq = ?, inbox = ? WHERE call_id = ?",
                (seq, inbox(seq), call_id),
            )
        return seq

    def reply(self, call_id: str, seq: int, outbox: str) -> None:
        """The holder's answer to round `seq`; dropped when a newer round took over meanwhile (its waiter would never
        see an answer stamped with an older round's number)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE mrtr_relay SET outbox = ? WHERE call_id = ? AND seq = ?", (outbox, call_id, seq))

    def finish(self, call_id: str, outcome: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE mrtr_relay SET outcome = ?, held_at = ? WHERE call_id = ?", (outcome, now_ms(), call_id)
            )

    def drop(self, call_id: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM mrtr_relay_asks WHERE call_id = ?", (call_id,))
            conn.execute("DELETE FROM mrtr_relay WHERE call_id = ?", (call_id,))

    def purge(self, older_than_ms: int) -> None:
        """Forget calls whose holder has not beaten for `older_than_ms` (ended, or its replica went away)."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM mrtr_relay WHERE held_at < ?", (now_ms() - older_than_ms,))
            conn.execute("DELETE FROM mrtr_relay_asks WHERE call_id NOT IN (SELECT call_id FROM mrtr_relay)")

    # -- turns on other replicas asking the call's client ---------------------------------------------------------

    def ask(self, ask_id: str, call_id: str, run_id: str, request: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO mrtr_relay_asks (ask_id, call_id, run_id, request) VALUES (?, ?, ?, ?)",
                (ask_id, call_id, run_id, request),
            )

    def open_asks(self, call_id: str) -> list[tuple[str, str, str]]:
        """(ask id, run id, request) of the call's unanswered asks."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT ask_id, run_id, request FROM mrtr_relay_asks WHERE call_id = ? AND answer IS NULL ORDER BY"
                " ask_id",
                (call_id,),
            ).fetchall()
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]

    def answer(self, ask_id: str, answer: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE mrtr_relay_asks SET answer = ? WHERE ask_id = ?", (answer, ask_id))

    def answer_of(self, ask_id: str) -> str | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT answer FROM mrtr_relay_asks WHERE ask_id = ?", (ask_id,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def drop_ask(self, ask_id: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM mrtr_relay_asks WHERE ask_id = ?", (ask_id,))


__all__ = ["RelayRow", "RelayStore", "migrate"]
