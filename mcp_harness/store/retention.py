"""`mcp-harness gc`: prune old events and finished runs' journals as `[store] retain` says, then give the space back.

Nothing is pruned on its own: only this, when it runs. It deletes, per session, the oldest events before a cutoff
(`now - age`, moved later while the log is over the size limit), never touching what a live thing needs:

- a session with an unfinished run (queued, claimed, running or waiting) keeps every event: its run replays them;
- a session keeps its last `keep_last` events whatever their age (what `read thread:<id>` shows), and with them its
  `seq` numbering, which goes on from the newest;
- a call still owed a result (`store/open_calls.py`) keeps its `tool_call` and everything after it;
- a journal is dropped only for a finished run whose whole tree has finished.

A session loses a prefix of its log, so what remains still reads as a conversation (a result whose call was pruned
replays as a late result, `runs/replay.py`). Pruned messages leave the search index; stored values no event uses any
more (`store/payloads.py`) are deleted. Each session is pruned in its own transaction, the checks made again inside
it, so a server running beside gc waits for one batch at a time and a run that starts meanwhile loses nothing.
A dry run does all of it inside one transaction and rolls back: the report is exact, the database untouched.

Then the space goes back to the file system. Incremental auto-vacuum can only be switched on for an existing database
by a full VACUUM, so the first gc of a database rewrites it once (it needs free disk about the database's size, and
holds the write lock while it runs); later ones run `PRAGMA incremental_vacuum`, which only frees pages. On
PostgreSQL autovacuum does that job: gc prunes and reports the database's size (`pg_database_size`), vacuums nothing.
"""

from __future__ import annotations

import sqlite3
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cbor2

from mcp_harness.runs.records import LIVE, TERMINAL
from mcp_harness.store import payloads
from mcp_harness.store._util import iso_time, now_ms
from mcp_harness.store.db import TEMP_IN_FILES, TEMP_IN_MEMORY, Database
from mcp_harness.store.dialect import backend

if TYPE_CHECKING:
    from mcp_harness.store.attachments import AttachmentStore

BATCH = 2000
"""Events deleted per transaction at most: a server beside gc waits on one batch, never on the whole prune."""
_LIVE = "(" + ", ".join(f"'{s}'" for s in sorted(LIVE)) + ")"
_DONE = "(" + ", ".join(f"'{s}'" for s in sorted(TERMINAL)) + ")"
_FOREVER = 1 << 62


@dataclass(frozen=True, kw_only=True, slots=True)
class Retention:
    """What gc keeps: events younger than `max_age_ms`, a log of at most `max_bytes`, each session's `keep_last`."""

    max_age_ms: int | None
    max_bytes: int | None
    keep_last: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Pruned:
    """What the pruning took (or, in a dry run, would take)."""

    cutoff: int
    """Events and journals created before this (epoch ms) went; 0: none was old enough."""
    events: int = 0
    event_bytes: int = 0
    sessions: int = 0
    """Sessions that lost events."""
    live_sessions: int = 0
    """Sessions kept whole because a run on them has not finished."""
    payloads: int = 0
    payload_bytes: int = 0
    journals: int = 0
    """Finished runs whose journal went."""
    journal_entries: int = 0
    journal_bytes: int = 0

    @property
    def cutoff_time(self) -> str | None:
        """The cutoff as ISO-8601 UTC, None when nothing was old enough."""
        return iso_time(self.cutoff) if self.cutoff else None


@dataclass(frozen=True, kw_only=True, slots=True)
class GcReport:
    dry_run: bool
    pruned: Pruned
    vacuum: str
    """"full" (the first gc: the database rewritten with incremental auto-vacuum), "incremental" or "none"."""
    file_bytes_before: int
    file_bytes_after: int
    attachment_files: int = 0
    """Attachment files no session holds any more (their sessions or agents were deleted), deleted."""
    attachment_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        p = self.pruned
        return {
            "dryRun": self.dry_run,
            "cutoff": p.cutoff_time,
            "events": {
                "pruned": p.events,
                "bytes": p.event_bytes,
                "sessions": p.sessions,
                "liveSessionsKept": p.live_sessions,
            },
            "payloads": {"pruned": p.payloads, "bytes": p.payload_bytes},
            "journals": {"runs": p.journals, "entries": p.journal_entries, "bytes": p.journal_bytes},
            "attachments": {"files": self.attachment_files, "bytes": self.attachment_bytes},
            "vacuum": self.vacuum,
            "fileBytes": {"before": self.file_bytes_before, "after": self.file_bytes_after},
        }


class _DryRun(Exception):
    """Raised to roll a dry run back."""


def collect(
    db: Database,
    policy: Retention,
    *,
    now: int | None = None,
    dry_run: bool = False,
    attachments: AttachmentStore | None = None,
) -> GcReport:
    """Prune as `policy` says, sweep unused stored values (and `attachments`' files no session holds), vacuum; or,
    with `dry_run`, say what that would do."""
    now = now_ms() if now is None else now
    before = _size(db)
    pruned = Pruned(cutoff=0)
    if dry_run:
        with suppress(_DryRun), db.transaction():
            pruned = _prune(db, policy, now)
            raise _DryRun
    else:
        pruned = _prune(db, policy, now)
    swept = attachments.sweep(dry_run=dry_run) if attachments is not None else (0, 0)
    vacuum = "none" if dry_run else _vacuum(db)
    return GcReport(
        dry_run=dry_run,
        pruned=pruned,
        vacuum=vacuum,
        file_bytes_before=before,
        file_bytes_after=_size(db),
        attachment_files=swept[0],
        attachment_bytes=swept[1],
    )


def file_bytes(path: Path) -> int:
    """The database's size on disk, its write-ahead log included."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def _size(db: Database) -> int:
    with db.reading() as conn:
        if backend(conn) == "postgres":
            return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
    return file_bytes(db.path)


def _prune(db: Database, policy: Retention, now: int) -> Pruned:
    cutoff = _cutoff(db, policy, now)
    with db.reading() as conn:
        sessions = [str(r[0]) for r in conn.execute("SELECT id FROM sessions ORDER BY created_at, id")]
        live = conn.execute(f"SELECT COUNT(DISTINCT session_id) FROM runs WHERE status IN {_LIVE}").fetchone()[0]
    events = event_bytes = touched = 0
    if cutoff > 0:
        for session_id in sessions:
            count, size = _prune_session(db, session_id, policy.keep_last, cutoff)
            events, event_bytes, touched = events + count, event_bytes + size, touched + (1 if count else 0)
    with db.transaction() as conn:
        swept, swept_bytes = payloads.sweep(conn)
    journals = _prune_journals(db, cutoff) if cutoff > 0 else (0, 0, 0)
    return Pruned(
        cutoff=min(cutoff, now),
        events=events,
        event_bytes=event_bytes,
        sessions=touched,
        live_sessions=int(live),
        payloads=swept,
        payload_bytes=swept_bytes,
        journals=journals[0],
        journal_entries=journals[1],
        journal_bytes=journals[2],
    )


def _prunable(alias: str = "e") -> str:
    """The SQL condition on event `alias` that no rule protects it (the age is checked apart)."""
    return (
        f"NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = {alias}.session_id AND r.status IN {_LIVE}) "
        f"AND {alias}.seq <= (SELECT MAX(x.seq) FROM session_events x WHERE x.session_id = {alias}.session_id) - ? "
        f"AND {alias}.seq < COALESCE((SELECT MIN(o.seq) FROM open_calls o WHERE o.session_id = {alias}.session_id), "
        f"{alias}.seq + 1)"
    )


def _cutoff(db: Database, policy: Retention, now: int) -> int:
    """Events created before this go: `now - max_age`, later while the log would stay over `max_bytes` (each stored
    value counted in equal shares among the events that use it). 0: nothing goes."""
    cutoff = 0 if policy.max_age_ms is None else max(0, now - policy.max_age_ms)
    if policy.max_bytes is None:
        return cutoff
    with db.reading() as conn:
        total = conn.execute(
            "SELECT (SELECT COALESCE(SUM(length(event_cbor)), 0) FROM session_events) "
            "+ (SELECT COALESCE(SUM(size), 0) FROM event_payloads)"
        ).fetchone()[0]
        excess = int(total) - policy.max_bytes
        if excess <= 0:
            return cutoff
        row = conn.execute(
            "WITH shares AS (SELECT r.hash, 1.0 * p.size / COUNT(*) AS share FROM event_payload_refs r "
            "JOIN event_payloads p ON p.hash = r.hash GROUP BY r.hash), "
            "candidates AS (SELECT e.created_at AS ts, length(e.event_cbor) + COALESCE((SELECT SUM(s.share) "
            "FROM event_payload_refs r JOIN shares s ON s.hash = r.hash WHERE r.session_id = e.session_id "
            f"AND r.seq = e.seq), 0) AS bytes FROM session_events e WHERE {_prunable()}) "
            "SELECT ts, freed FROM (SELECT ts, SUM(bytes) OVER (ORDER BY ts ROWS UNBOUNDED PRECEDING) AS freed "
            "FROM candidates) AS running WHERE freed >= ? ORDER BY ts LIMIT 1",
            (policy.keep_last, excess),
        ).fetchone()
    # Short of the limit even with every prunable event gone: all of them go.
    return max(cutoff, _FOREVER if row is None else int(row[0]) + 1)


def _floor(conn: sqlite3.Connection, session_id: str, keep_last: int) -> int:
    """The session's first protected `seq`: its last `keep_last` events, its oldest open call; 0 (all of it) while a
    run on it has not finished."""
    row = conn.execute(
        "SELECT MIN(COALESCE((SELECT MAX(seq) FROM session_events WHERE session_id = :s), 0) - :keep + 1, "
        f"COALESCE((SELECT MIN(seq) FROM open_calls WHERE session_id = :s), {_FOREVER})) "
        f"WHERE NOT EXISTS (SELECT 1 FROM runs WHERE session_id = :s AND status IN {_LIVE})",
        {"s": session_id, "keep": keep_last},
    ).fetchone()
    return 0 if row is None else int(row[0])


def _prune_session(db: Database, session_id: str, keep_last: int, cutoff: int) -> tuple[int, int]:
    """Delete the session's events before `cutoff` below its floor, a batch per transaction, the floor found again in
    each; returns (events, bytes)."""
    events = size = 0
    while True:
        with db.transaction() as conn:
            rows = conn.execute(
                "SELECT seq, length(event_cbor), CASE WHEN type = 'message' THEN event_cbor END FROM session_events "
                "WHERE session_id = ? AND seq < ? AND created_at < ? ORDER BY seq LIMIT ?",
                (session_id, _floor(conn, session_id, keep_last), cutoff, BATCH),
            ).fetchall()
            conn.executemany(
                "DELETE FROM session_events WHERE session_id = ? AND seq = ?", [(session_id, r[0]) for r in rows]
            )
            _unindex(conn, session_id, [r[2] for r in rows if r[2] is not None])
        events += len(rows)
        size += sum(int(r[1]) for r in rows)
        if len(rows) < BATCH:
            return events, size


def _unindex(conn: sqlite3.Connection, session_id: str, messages: list[bytes]) -> None:
    """Take pruned messages out of the search index (`store/search.py` keeps one row per message, by content)."""
    from mcp_harness.store.search import message_text

    postgres = backend(conn) == "postgres"
    for blob in messages:
        text = message_text(cbor2.loads(blob))
        if text is None:
            continue
        if postgres:
            _unindex_pg(conn, session_id, text)
            continue
        exact = "SELECT rowid FROM message_search WHERE session_id = ? AND content = ? ORDER BY rowid LIMIT 1"
        row = None
        if len(text) >= 3:
            # The trigram index finds the row from a piece of its text; the rest of the condition checks it is this.
            phrase = '"' + text[:64].replace('"', '""') + '"'
            indexed = exact.replace("WHERE", "WHERE message_search MATCH ? AND")
            with suppress(sqlite3.OperationalError):  # a piece FTS5 cannot parse: the scan below finds it
                row = conn.execute(indexed, (phrase, session_id, text)).fetchone()
        if row is None:
            row = conn.execute(exact, (session_id, text)).fetchone()
        if row is not None:
            conn.execute("DELETE FROM message_search WHERE rowid = ?", (row[0],))


def _unindex_pg(conn: sqlite3.Connection, session_id: str, text: str) -> None:
    """`_unindex` on PostgreSQL: the row by its identity `id` (no rowid there). pg_trgm's GIN index can find it from
    the text's start as FTS5's trigram MATCH does (`ILIKE`, with `%`, `_` and backslash escaped), or the planner
    reads the session's rows; `content = ?` checks it is this message."""
    piece = text[:64].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    row = conn.execute(
        "SELECT id FROM message_search WHERE session_id = ? AND content ILIKE ? ESCAPE '\\' AND content = ? "
        "ORDER BY id LIMIT 1",
        (session_id, f"{piece}%", text),
    ).fetchone()
    if row is not None:
        conn.execute("DELETE FROM message_search WHERE id = ?", (row[0],))


def _prune_journals(db: Database, cutoff: int) -> tuple[int, int, int]:
    """Drop the journals of runs finished before `cutoff` whose whole tree has finished; (runs, entries, bytes)."""
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT j.run_id, COUNT(*), SUM(length(j.entry_cbor)) FROM run_journal j JOIN runs r ON r.id = j.run_id "
            f"WHERE r.status IN {_DONE} AND COALESCE(r.finished_at, r.updated_at) < ? AND NOT EXISTS "
            f"(SELECT 1 FROM runs u WHERE u.root_run_id = r.root_run_id AND u.status IN {_LIVE}) GROUP BY j.run_id",
            (cutoff,),
        ).fetchall()
        conn.executemany("DELETE FROM run_journal WHERE run_id = ?", [(r[0],) for r in rows])
    return len(rows), sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows)


def _vacuum(db: Database) -> str:
    with db.reading() as conn:
        if backend(conn) == "postgres":
            return "none"  # autovacuum's job; PRAGMA, VACUUM into a new layout and the WAL checkpoint are SQLite's
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
            # executescript steps the pragma to its end; execute() would free a single page.
            conn.executescript("PRAGMA incremental_vacuum;")
            mode = "incremental"
        else:
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute(TEMP_IN_FILES)  # VACUUM copies the whole database through temporary storage: on disk
            try:
                conn.execute("VACUUM")
            finally:
                conn.execute(TEMP_IN_MEMORY)
            mode = "full"
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return mode


__all__ = ["BATCH", "GcReport", "Pruned", "Retention", "collect", "file_bytes"]
