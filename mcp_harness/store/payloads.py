"""Large values of logged tool events, stored once by content hash beside the log (`event_payloads`, migration m012).

An agent that reads the same 100 KiB file a thousand times used to log it a thousand times: each `tool_result` event
held its full output, so the database grew by 100 MB. Now, when a `tool_call` or `tool_result` event encodes larger
than `EXTERNAL_BYTES`, each string or byte string in it of at least that size is stored in `event_payloads`, keyed by
the SHA-256 of its CBOR, and the event's CBOR holds a tag naming that hash in its place. Equal values share one row
across events and sessions; `event_payload_refs` records which event uses which row, so `mcp-harness gc`
(`store/retention.py`) can drop the rows no event uses. Reading resolves each tag back into the value, so
`SessionStore.events()` returns exactly the payloads that were appended.

Only tool events are split: they carry the bulk (file contents, command output, fetched pages) and only
`SessionStore` decodes them. Messages stay whole, so the search index's own scans (`store/search.py`) still read them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import cbor2

from mcp_harness.errors import StorageError
from mcp_harness.store.port import Connection, Store

EXTERNAL_BYTES = 4096
"""An event this size or smaller is stored whole; in a larger one, every string of at least this size moves out.
Below a page (4 KiB), a value would cost its row and two index entries for little it could share."""
PAYLOAD_TAG = 1_752_460_400
"""The CBOR tag (unassigned in the IANA registry) marking a value kept in `event_payloads`; its content: the hash."""
SPLIT_TYPES = frozenset({"tool_call", "tool_result"})

SCHEMA = (
    # A rowid table: a value larger than a quarter page spills into overflow pages, and a WITHOUT ROWID table keeps
    # only ~500 bytes of it in the leaf and starts a fresh 4 KiB page for the rest.
    "CREATE TABLE event_payloads (hash BLOB PRIMARY KEY, size INTEGER NOT NULL, created_at INTEGER NOT NULL, "
    "cbor BLOB NOT NULL)",
    "CREATE TABLE event_payload_refs (session_id TEXT NOT NULL, seq INTEGER NOT NULL, hash BLOB NOT NULL, "
    "PRIMARY KEY (session_id, seq, hash), "
    "FOREIGN KEY (session_id, seq) REFERENCES session_events (session_id, seq) ON DELETE CASCADE) WITHOUT ROWID",
    "CREATE INDEX event_payload_refs_by_hash ON event_payload_refs (hash)",
)


class MissingValue(StorageError):
    """An event names a stored value that is not there (gc pruned the event meanwhile, or the database is damaged)."""


@dataclass(frozen=True, slots=True)
class Split:
    """An event as stored: its CBOR (with tags where values moved out) and the values that moved, by hash."""

    blob: bytes
    parts: dict[bytes, bytes]
    """SHA-256 of a value's CBOR → that CBOR."""


def split(payload: dict[str, Any], blob: bytes) -> Split:
    """The stored form of an event whose whole CBOR is `blob`. Only a large tool event pays for the walk."""
    if len(blob) <= EXTERNAL_BYTES or payload.get("type") not in SPLIT_TYPES:
        return Split(blob, {})
    parts: dict[bytes, bytes] = {}
    stub = _moved_out(payload, parts)
    return Split(cbor2.dumps(stub), parts) if parts else Split(blob, {})


def _moved_out(value: Any, parts: dict[bytes, bytes]) -> Any:
    if isinstance(value, dict):
        return {key: _moved_out(item, parts) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list | tuple):
        return [_moved_out(item, parts) for item in value]  # pyright: ignore[reportUnknownVariableType]
    # A character takes at most 4 bytes of UTF-8: anything shorter than a quarter of the bound stays, unencoded.
    if isinstance(value, str | bytes) and len(value) * 4 >= EXTERNAL_BYTES:
        encoded = cbor2.dumps(value)
        if len(encoded) >= EXTERNAL_BYTES:
            digest = hashlib.sha256(encoded).digest()
            parts[digest] = encoded
            return cbor2.CBORTag(PAYLOAD_TAG, digest)
    return value


def store(conn: Connection, session_id: str, seq: int, parts: dict[bytes, bytes], ts: int) -> None:
    """Keep the values an appended event moved out (each once) and its references to them (in the append's
    transaction)."""
    if not parts:
        return
    conn.executemany(
        "INSERT OR IGNORE INTO event_payloads (hash, size, created_at, cbor) VALUES (?, ?, ?, ?)",
        [(digest, len(encoded), ts, encoded) for digest, encoded in parts.items()],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO event_payload_refs (session_id, seq, hash) VALUES (?, ?, ?)",
        [(session_id, seq, digest) for digest in parts],
    )


class Resolver:
    """Decodes stored events, putting each moved-out value back; fetches a value once however many events share it
    (one lookup by hash each, under the connection's lock only for that lookup)."""

    def __init__(self, db: Store) -> None:
        self._db = db
        self._fetched: dict[bytes, bytes] = {}

    def loads(self, blob: bytes) -> Any:
        try:
            return cbor2.loads(blob, tag_hook=self._hook)
        except cbor2.CBORDecodeError as exc:
            if isinstance(exc.__cause__, MissingValue):  # cbor2 wraps what a tag hook raises
                raise exc.__cause__ from None
            raise

    def _hook(self, first: Any, second: Any) -> Any:
        # cbor2 5 calls `hook(decoder, tag)`, cbor2 6 `hook(tag, immutable)`: take the tag from where it is.
        tag = first if isinstance(first, cbor2.CBORTag) else second
        if tag.tag != PAYLOAD_TAG:
            return tag
        digest = bytes(tag.value)
        encoded = self._fetched.get(digest)
        if encoded is None:
            with self._db.reading() as conn:
                row = conn.execute("SELECT cbor FROM event_payloads WHERE hash = ?", (digest,)).fetchone()
            if row is None:
                raise MissingValue(f"A logged event names a stored value that is missing ({digest.hex()[:16]}…).")
            encoded = self._fetched[digest] = bytes(row[0])
        return cbor2.loads(encoded)


def sweep(conn: Connection) -> tuple[int, int]:
    """Delete the stored values no event references any more; returns (values, bytes)."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM event_payloads p "
        "WHERE NOT EXISTS (SELECT 1 FROM event_payload_refs r WHERE r.hash = p.hash)"
    ).fetchone()
    conn.execute(
        "DELETE FROM event_payloads WHERE NOT EXISTS (SELECT 1 FROM event_payload_refs r "
        "WHERE r.hash = event_payloads.hash)"
    )
    return int(row[0]), int(row[1])


def split_existing(conn: Connection, batch: int = 500) -> int:
    """Split the large tool events a database logged before m012 (once, by the migration); returns how many.
    Pages by key, so no cursor stays open on the rows it rewrites."""
    done, after = 0, ("", 0)
    while rows := conn.execute(
        "SELECT session_id, seq, created_at, event_cbor FROM session_events WHERE (session_id, seq) > (?, ?) "
        "AND type IN ('tool_call', 'tool_result') AND length(event_cbor) > ? ORDER BY session_id, seq LIMIT ?",
        (*after, EXTERNAL_BYTES, batch),
    ).fetchall():
        for session_id, seq, created_at, blob in rows:
            stored = split(cbor2.loads(blob), blob)
            if stored.parts:
                store(conn, session_id, seq, stored.parts, created_at)
                conn.execute(
                    "UPDATE session_events SET event_cbor = ? WHERE session_id = ? AND seq = ?",
                    (stored.blob, session_id, seq),
                )
                done += 1
        after = (rows[-1][0], rows[-1][1])
    return done


__all__ = [
    "EXTERNAL_BYTES",
    "PAYLOAD_TAG",
    "SCHEMA",
    "MissingValue",
    "Resolver",
    "Split",
    "split",
    "split_existing",
    "store",
    "sweep",
]
