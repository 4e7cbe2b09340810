"""Triggers, their firings and the activity monitor's watermarks (HARNESS §10).

A trigger is a row of its agent: a normalized source, a prompt, a continuation. A firing is recorded durably with a
dedupe key unique per trigger (`INSERT OR IGNORE`), in the same transaction as the session and run it starts
(`triggers/fire.py`), so an occurrence fires once across restarts and crashes. Schedule triggers carry
`next_due_at`, the earliest time their schedule can have an occurrence due, indexed: a scheduler tick reads the due
rows and nothing else, however many triggers exist. The watermarks table is where the activity monitor keeps how far
it has read the activity feed, per account and feed.

Methods block on SQLite; call them off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import cbor2

from mcp_harness.jsondepth import without_surrogates
from mcp_harness.store._util import new_id, now_ms
from mcp_harness.store.port import Connection, Store

ACTIVITY_FEED = "hm-activity"
"""The watermark feed of the embedded node's activity (`store/hm_activity.py`)."""
WATCHED_SOURCES = ("document-comment", "user-mention", "site-update")
"""Sources the activity monitor evaluates: saving one starts the account's watermark (`ensure_watermark`)."""

FiringStatus = Literal["created", "started", "delivered", "no-listener", "error", "succeeded", "failed"]

SCHEMA = (
    """
    CREATE TABLE triggers (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id),
        agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        enabled INTEGER NOT NULL DEFAULT 1,
        source_type TEXT NOT NULL,
        source_cbor BLOB NOT NULL,
        prompt TEXT NOT NULL,
        continuation_cbor BLOB,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        last_fired_at INTEGER,
        last_error TEXT,
        next_due_at INTEGER
    ) WITHOUT ROWID
    """,
    "CREATE INDEX triggers_by_agent ON triggers (agent_id, updated_at DESC)",
    # The scheduler's tick: only enabled schedule triggers have a next_due_at.
    "CREATE INDEX triggers_due ON triggers (next_due_at) WHERE next_due_at IS NOT NULL",
    # Run-completed triggers are looked up at every run's terminal commit; the activity sources per new event.
    "CREATE INDEX triggers_enabled_by_type ON triggers (account_id, source_type) WHERE enabled = 1",
    """
    CREATE TABLE trigger_firings (
        id TEXT PRIMARY KEY,
        trigger_id TEXT NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
        account_id TEXT NOT NULL,
        dedupe_key TEXT NOT NULL,
        status TEXT NOT NULL CHECK (
            status IN ('created', 'started', 'delivered', 'no-listener', 'error', 'succeeded', 'failed')
        ),
        session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
        run_id TEXT,
        activity_cbor BLOB,
        summary TEXT,
        error TEXT,
        fired_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (trigger_id, dedupe_key)
    )
    """,
    "CREATE INDEX trigger_firings_recent ON trigger_firings (trigger_id, fired_at DESC)",
    # A webhook trigger's sealed secret (triggers/webhooks.py `secret_name`) goes with it, however the row goes —
    # including the cascade when its agent is deleted.
    "CREATE TRIGGER triggers_drop_webhook_secret AFTER DELETE ON triggers BEGIN "
    "DELETE FROM secrets WHERE account_id = old.account_id AND name = 'webhook:' || old.id; END",
    "CREATE INDEX trigger_firings_by_run ON trigger_firings (run_id) WHERE run_id IS NOT NULL",
    """
    CREATE TABLE trigger_watermarks (
        account_id TEXT NOT NULL,
        feed TEXT NOT NULL,
        seq INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (account_id, feed)
    ) WITHOUT ROWID
    """,
)


def migrate(conn: Connection) -> None:
    """Create this store's schema (an older database has no triggers to backfill)."""
    for statement in SCHEMA:
        conn.execute(statement)


@dataclass(frozen=True, kw_only=True, slots=True)
class TriggerRecord:
    """One `triggers` row, its CBOR columns decoded."""

    id: str
    account_id: str
    agent_id: str
    name: str
    enabled: bool
    source: dict[str, Any]
    """The normalized source (`triggers/sources.py`), `{type, …}`."""
    prompt: str
    continuation: dict[str, Any] | None
    """None: `newThread`."""
    created_at: int
    updated_at: int
    last_fired_at: int | None
    last_error: str | None
    next_due_at: int | None
    """Schedule triggers only: the earliest time an occurrence can be due (None: never again, or disabled)."""

    @property
    def source_type(self) -> str:
        return str(self.source["type"])


@dataclass(frozen=True, kw_only=True, slots=True)
class FiringRecord:
    """One `trigger_firings` row."""

    id: str
    trigger_id: str
    account_id: str
    dedupe_key: str
    status: str
    session_id: str | None
    run_id: str | None
    activity: dict[str, Any] | None
    summary: str | None
    error: str | None
    fired_at: int
    updated_at: int


def _load(blob: bytes | None) -> Any:
    return None if blob is None else cbor2.loads(blob)


def _trigger(row: Any) -> TriggerRecord:
    return TriggerRecord(
        id=row["id"],
        account_id=row["account_id"],
        agent_id=row["agent_id"],
        name=row["name"],
        enabled=bool(row["enabled"]),
        source=cbor2.loads(row["source_cbor"]),
        prompt=row["prompt"],
        continuation=_load(row["continuation_cbor"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_fired_at=row["last_fired_at"],
        last_error=row["last_error"],
        next_due_at=row["next_due_at"],
    )


def _firing(row: Any) -> FiringRecord:
    return FiringRecord(
        id=row["id"],
        trigger_id=row["trigger_id"],
        account_id=row["account_id"],
        dedupe_key=row["dedupe_key"],
        status=row["status"],
        session_id=row["session_id"],
        run_id=row["run_id"],
        activity=_load(row["activity_cbor"]),
        summary=row["summary"],
        error=row["error"],
        fired_at=row["fired_at"],
        updated_at=row["updated_at"],
    )


class TriggerStore:
    """The trigger tables. Methods block; call them off the event loop."""

    def __init__(self, db: Store) -> None:
        self.db = db

    # -- triggers ------------------------------------------------------------------------------------------------

    def get(self, trigger_id: str) -> TriggerRecord | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT * FROM triggers WHERE id = ?", (trigger_id,)).fetchone()
        return None if row is None else _trigger(row)

    def of_agent(self, agent_id: str) -> list[TriggerRecord]:
        """The agent's triggers, most recently updated first."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM triggers WHERE agent_id = ? ORDER BY updated_at DESC, id", (agent_id,)
            ).fetchall()
        return [_trigger(r) for r in rows]

    def named(self, agent_id: str, name: str) -> list[TriggerRecord]:
        """The agent's triggers of exactly this name, most recently updated first."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM triggers WHERE agent_id = ? AND name = ? ORDER BY updated_at DESC, id", (agent_id, name)
            ).fetchall()
        return [_trigger(r) for r in rows]

    def index_entries(self, agent_id: str, limit: int = 16) -> tuple[list[tuple[str, bool]], int]:
        """(name, enabled) of the agent's first `limit` triggers by name, and how many of all are enabled: what the
        `<space>` index shows, without decoding a source."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT name, enabled FROM triggers WHERE agent_id = ? ORDER BY name, id LIMIT ?", (agent_id, limit)
            ).fetchall()
            active = conn.execute(
                "SELECT COUNT(*) FROM triggers WHERE agent_id = ? AND enabled = 1", (agent_id,)
            ).fetchone()[0]
        return [(r["name"], bool(r["enabled"])) for r in rows], int(active)

    def save(
        self,
        *,
        account_id: str,
        agent_id: str,
        name: str,
        enabled: bool,
        source: dict[str, Any],
        prompt: str,
        continuation: dict[str, Any] | None,
        next_due: Any,
        trigger_id: str | None = None,
        now: int | None = None,
    ) -> TriggerRecord:
        """Create a trigger, or (with `trigger_id`) replace one's definition keeping its id, `created_at` and
        `last_fired_at` and clearing `last_error`. `next_due(created_at, last_fired_at) -> int | None` gives the
        schedule's next due time (`triggers/schedule.py`); it is asked inside the transaction."""
        ts = now_ms() if now is None else now
        with self.db.transaction() as conn:
            existing = None
            if trigger_id is not None:
                existing = conn.execute(
                    "SELECT created_at, last_fired_at FROM triggers WHERE id = ?", (trigger_id,)
                ).fetchone()
            created_at = existing["created_at"] if existing is not None else ts
            last_fired_at = existing["last_fired_at"] if existing is not None else None
            due = next_due(created_at, last_fired_at) if enabled else None
            values = (
                name,
                int(enabled),
                source["type"],
                cbor2.dumps(source),
                prompt,
                None if continuation is None else cbor2.dumps(continuation),
                ts,
                due,
            )
            if existing is not None:
                conn.execute(
                    "UPDATE triggers SET name = ?, enabled = ?, source_type = ?, source_cbor = ?, prompt = ?, "
                    "continuation_cbor = ?, updated_at = ?, next_due_at = ?, last_error = NULL WHERE id = ?",
                    (*values, trigger_id),
                )
                tid = trigger_id
            else:
                tid = trigger_id or new_id()
                conn.execute(
                    "INSERT INTO triggers (name, enabled, source_type, source_cbor, prompt, continuation_cbor, "
                    "updated_at, next_due_at, id, account_id, agent_id, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, tid, account_id, agent_id, created_at),
                )
            row = conn.execute("SELECT * FROM triggers WHERE id = ?", (tid,)).fetchone()
            if source["type"] in WATCHED_SOURCES:
                self.ensure_watermark(account_id)
        return _trigger(row)

    def delete(self, trigger_id: str) -> bool:
        """Delete a trigger and its firings (their sessions and runs stay)."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM triggers WHERE id = ?", (trigger_id,)).rowcount > 0

    def due(self, now: int, limit: int) -> list[str]:
        """Ids of the schedule triggers whose next due time has come, earliest first."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT id FROM triggers WHERE next_due_at IS NOT NULL AND next_due_at <= ? "
                "ORDER BY next_due_at, id LIMIT ?",
                (now, limit),
            ).fetchall()
        return [r[0] for r in rows]

    def next_due(self) -> int | None:
        """The earliest next due time of any schedule trigger."""
        with self.db.reading() as conn:
            row = conn.execute("SELECT MIN(next_due_at) FROM triggers WHERE next_due_at IS NOT NULL").fetchone()
        return None if row[0] is None else int(row[0])

    def enabled_of_type(self, account_id: str, source_type: str) -> list[TriggerRecord]:
        """The account's enabled triggers of one source type, oldest first."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM triggers WHERE account_id = ? AND source_type = ? AND enabled = 1 "
                "ORDER BY created_at, id",
                (account_id, source_type),
            ).fetchall()
        return [_trigger(r) for r in rows]

    def enabled_of_types(self, account_id: str, source_types: tuple[str, ...]) -> list[TriggerRecord]:
        """The account's enabled triggers of any of these source types, oldest first."""
        marks = ",".join("?" * len(source_types))
        with self.db.reading() as conn:
            rows = conn.execute(
                f"SELECT * FROM triggers WHERE account_id = ? AND source_type IN ({marks}) AND enabled = 1 "
                "ORDER BY created_at, id",
                (account_id, *source_types),
            ).fetchall()
        return [_trigger(r) for r in rows]

    def advance(self, trigger_id: str, *, fired_at: int | None, next_due_at: int | None, disable: bool = False) -> None:
        """After an occurrence: `last_fired_at` (if given), the next due time, and `once` disabled."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE triggers SET last_fired_at = COALESCE(?, last_fired_at), next_due_at = ?, "
                "enabled = CASE WHEN ? = 1 THEN 0 ELSE enabled END WHERE id = ?",  # `= 1`: PostgreSQL wants a boolean
                (fired_at, next_due_at, int(disable), trigger_id),
            )

    def mark_fired(self, trigger_id: str, fired_at: int) -> None:
        """A firing started its thread or delivered its signal: `last_fired_at` moves on, `last_error` clears."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE triggers SET last_fired_at = MAX(COALESCE(last_fired_at, 0), ?), last_error = NULL "
                "WHERE id = ?",
                (fired_at, trigger_id),
            )

    def set_error(self, trigger_id: str, error: str | None) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE triggers SET last_error = ? WHERE id = ?", (error, trigger_id))

    # -- firings -------------------------------------------------------------------------------------------------

    def insert_firing(
        self,
        *,
        trigger: TriggerRecord,
        dedupe_key: str,
        activity: dict[str, Any],
        summary: str,
        fired_at: int,
    ) -> str | None:
        """Record a firing as `created`; None when this trigger already fired for `dedupe_key`."""
        firing_id = new_id()
        try:
            encoded = cbor2.dumps(activity)
        except UnicodeEncodeError:  # what came from outside may hold a lone surrogate: kept as U+FFFD
            encoded = cbor2.dumps(without_surrogates(activity))
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO trigger_firings (id, trigger_id, account_id, dedupe_key, status, "
                "activity_cbor, summary, fired_at, updated_at) VALUES (?, ?, ?, ?, 'created', ?, ?, ?, ?)",
                (
                    firing_id,
                    trigger.id,
                    trigger.account_id,
                    dedupe_key,
                    encoded,
                    summary,
                    fired_at,
                    fired_at,
                ),
            )
        return firing_id if cursor.rowcount > 0 else None

    def update_firing(
        self,
        firing_id: str,
        *,
        status: FiringStatus,
        session_id: str | None = None,
        run_id: str | None = None,
        error: str | None = None,
    ) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE trigger_firings SET status = ?, session_id = COALESCE(?, session_id), "
                "run_id = COALESCE(?, run_id), error = ?, updated_at = ? WHERE id = ?",
                (status, session_id, run_id, error, now_ms(), firing_id),
            )

    def firing(self, firing_id: str) -> FiringRecord | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT * FROM trigger_firings WHERE id = ?", (firing_id,)).fetchone()
        return None if row is None else _firing(row)

    def recent_firings(self, trigger_id: str, limit: int = 5) -> list[FiringRecord]:
        """The trigger's latest firings, newest first."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM trigger_firings WHERE trigger_id = ? ORDER BY fired_at DESC, id LIMIT ?",
                (trigger_id, limit),
            ).fetchall()
        return [_firing(r) for r in rows]

    def firings_of(self, trigger_id: str) -> list[FiringRecord]:
        """Every firing of the trigger, oldest first."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM trigger_firings WHERE trigger_id = ? ORDER BY fired_at, id", (trigger_id,)
            ).fetchall()
        return [_firing(r) for r in rows]

    # -- the activity monitor's watermarks -----------------------------------------------------------------------

    def watermark(self, account_id: str, feed: str) -> int | None:
        """How far the monitor has read `feed` for the account (None: never, so it starts at the feed's head)."""
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT seq FROM trigger_watermarks WHERE account_id = ? AND feed = ?", (account_id, feed)
            ).fetchone()
        return None if row is None else int(row[0])

    def ensure_watermark(self, account_id: str, feed: str = ACTIVITY_FEED) -> None:
        """Start the account's watermark at the feed's head unless it has one: what was observed before the first
        activity trigger (or the first monitor) never fires; what comes after does, even before a monitor runs."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO trigger_watermarks (account_id, feed, seq, updated_at) "
                "SELECT ?, ?, COALESCE(MAX(seq), 0), ? FROM hm_activity",
                (account_id, feed, now_ms()),
            )

    def set_watermark(self, account_id: str, feed: str, seq: int) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO trigger_watermarks (account_id, feed, seq, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (account_id, feed) DO UPDATE SET seq = excluded.seq, updated_at = excluded.updated_at",
                (account_id, feed, seq, now_ms()),
            )


__all__ = [
    "ACTIVITY_FEED",
    "WATCHED_SOURCES",
    "FiringRecord",
    "FiringStatus",
    "TriggerRecord",
    "TriggerStore",
    "migrate",
]
