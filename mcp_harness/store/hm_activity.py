"""The activity feed of the embedded node (`hm_activity`, migration m014): one row per event, as blobs are stored.

`record_activity` runs inside `HypermediaStore.put`'s transaction, after every blob of the batch is indexed, so an
event is there exactly when its blob is (a crash loses neither alone) and `seq` — the INTEGER PRIMARY KEY, so never
reused — numbers events in the order this node observed them: the watermark the trigger monitor resumes from. The
events of a blob are `hypermedia/activity.py`'s; what is looked up when a page is read is `hm_activity_view.py`'s.

A document's citations live in its Changes, but a Change does not say which document it belongs to (every document
a key creates shares the ts=0 genesis): they are recorded when a Ref lands on the Change, walking back from the Ref's
heads through the deps not yet attributed (`hm_activity_changes`), so each Change is read once, and a move — a new
Ref on the same heads — cites nothing twice. A Change that arrives only after the Ref that names it (blobs from
elsewhere, out of order) is cited when the next Ref of its document lands on it or a later change.

The migration backfills: every blob an older database already holds is recorded, in the order it was received.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mcp_harness.hypermedia import activity, mentions
from mcp_harness.hypermedia.activity import ActivityEvent, NewEvent
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.ids import tsid
from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Connection, Store

if TYPE_CHECKING:
    from mcp_harness.hypermedia.blobs import Blob

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE hm_activity (
    seq INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    kind TEXT NOT NULL,
    cid TEXT NOT NULL,
    author TEXT NOT NULL,
    resource TEXT NOT NULL,
    target TEXT,
    about TEXT NOT NULL,
    mentions TEXT NOT NULL,
    observed_at INTEGER NOT NULL,
    event_at INTEGER NOT NULL,
    summary TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX hm_activity_by_author ON hm_activity (author, seq);
CREATE INDEX hm_activity_by_type ON hm_activity (type, seq);
CREATE INDEX hm_activity_by_resource ON hm_activity (about, seq);
CREATE TABLE hm_activity_changes (cid TEXT PRIMARY KEY, resource TEXT NOT NULL) WITHOUT ROWID
"""
"""`about` is what a `resource` filter matches (a citation's target, else the resource); `kind` Seed's own event
type, for `eventTypes` given the daemon's way; `mentions` the @-mentioned accounts, space-separated."""


def migrate(conn: Connection) -> None:
    """Create the feed's tables and record the events of every blob already stored, oldest received first."""
    for statement in _SCHEMA.split(";"):
        conn.execute(statement)
    cids = [row[0] for row in conn.execute("SELECT cid FROM hm_blobs ORDER BY received_at, ts, cid").fetchall()]
    for start in range(0, len(cids), 500):
        chunk = cids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT cid, data, received_at FROM hm_blobs WHERE cid IN ({marks})", chunk).fetchall()
        found = {row[0]: (bytes(row[1]), int(row[2])) for row in rows}
        for cid in chunk:
            data, received_at = found[cid]
            value = decode(data)
            if isinstance(value, dict) and isinstance(value.get("type"), str):
                _record_one(conn, _Stored(cid, data, value), received_at)  # pyright: ignore[reportUnknownArgumentType]


class _Stored:
    """A blob as `record_activity` reads it: what `hypermedia.blobs.Blob` has, rebuilt from a stored row."""

    def __init__(self, cid: str, data: bytes, value: dict[str, Any]) -> None:
        self.cid, self.data, self.value = cid, data, value
        self.type: str = value["type"]
        self.ts = int(value.get("ts") or 0)
        signer = value.get("signer")
        self.author = activity.account_of(signer) or ""


def record_activity(conn: Connection, blobs: Iterable[Blob]) -> int:
    """Record the events of blobs just stored (in `put`'s transaction, after the whole batch is indexed); returns
    how many were added."""
    observed = now_ms()
    return sum(_record_one(conn, _Stored(str(b.cid), b.data, b.value), observed) for b in blobs)


def _record_one(conn: Connection, blob: _Stored, observed_at: int) -> int:
    events = _events(conn, blob)
    added = 0
    for event in events:
        added += conn.execute(
            "INSERT OR IGNORE INTO hm_activity (key, type, kind, cid, author, resource, target, about, mentions, "
            "observed_at, event_at, summary, data) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                event.key,
                event.type,
                event.kind,
                event.cid,
                event.author,
                event.resource,
                event.target,
                event.about,
                " ".join(event.mentions),
                observed_at,
                event.event_at,
                event.summary,
                json.dumps(event.data, separators=(",", ":"), default=str),
            ),
        ).rowcount
    return added


def _events(conn: Connection, blob: _Stored) -> list[NewEvent]:
    value, cid, author, ts = blob.value, blob.cid, blob.author, blob.ts
    if blob.type == "Comment":
        own_tsid = str(value.get("id") or tsid(ts, blob.data))
        root = _comment_id(conn, value.get("threadRoot"))
        parent = _comment_id(conn, value.get("replyParent") or value.get("threadRoot"))
        comment = activity.comment_json(cid, author, own_tsid, value, reply_parent=parent, thread_root=root)
        return activity.comment_events(cid, author, ts, comment, value)
    if blob.type == "Ref":
        space = activity.account_of(value.get("space")) or author
        path = str(value.get("path") or "")
        heads = [str(h) for h in value.get("heads") or () if isinstance(h, CID)]
        update = activity.ref_event(cid, author, ts, space, path, heads)
        if update is None or value.get("redirect"):
            return []
        return [update, *_change_citations(conn, update.resource, heads)]
    if blob.type == "Capability":
        return [e for e in [activity.capability_event(cid, author, ts, value)] if e is not None]
    if blob.type == "Contact":
        return [e for e in [activity.contact_event(cid, author, ts, tsid(ts, blob.data), value)] if e is not None]
    return []


def _comment_id(conn: Connection, link: object) -> str | None:
    """The `author/tsid` of the comment blob a CID names, if this node holds it."""
    if not isinstance(link, CID):
        return None
    row = conn.execute("SELECT author, tsid FROM hm_comments WHERE cid = ?", (str(link),)).fetchone()
    return None if row is None else f"{row[0]}/{row[1]}"


def _change_citations(conn: Connection, resource: str, heads: Sequence[str]) -> list[NewEvent]:
    """The citations of the Changes a Ref lands on that no earlier Ref did, attributing each to `resource`."""
    out: list[NewEvent] = []
    frontier = list(dict.fromkeys(heads))
    while frontier:
        following: list[str] = []
        for start in range(0, len(frontier), 500):
            chunk = frontier[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                "SELECT c.cid, c.author, c.ts, c.deps, b.data FROM hm_changes c JOIN hm_blobs b ON b.cid = c.cid "
                f"WHERE c.cid IN ({marks}) AND NOT EXISTS (SELECT 1 FROM hm_activity_changes a WHERE a.cid = c.cid)",
                chunk,
            ).fetchall()
            for cid, author, ts, deps, data in rows:
                conn.execute("INSERT INTO hm_activity_changes (cid, resource) VALUES (?, ?)", (cid, resource))
                value = decode(bytes(data))
                if isinstance(value, dict):
                    links = list(mentions.links_in(mentions.change_blocks(value)))  # pyright: ignore[reportUnknownArgumentType]
                    out.extend(activity.citations(resource, "doc", cid, author, ts, links))
                following.extend(d for d in deps.split(".") if d)
        frontier = list(dict.fromkeys(following))
    return out


def row_event(row: Any, data: dict[str, Any] | None = None) -> ActivityEvent:
    """An `hm_activity` row as an ActivityEvent, with `data` (resolved, else as stored); a resolved author's name
    stands for its account id in the summary ("comment by Alice on hm://…")."""
    summary: str = row["summary"]
    metadata = data.get("author", {}).get("metadata") if data is not None else None
    if isinstance(metadata, dict) and metadata.get("name"):
        summary = summary.replace(row["author"], str(metadata["name"]), 1)  # pyright: ignore[reportUnknownArgumentType]
    return ActivityEvent(
        seq=row["seq"],
        key=row["key"],
        type=row["type"],
        cid=row["cid"],
        author=row["author"],
        resource=row["resource"],
        target=row["target"],
        mentions=tuple(row["mentions"].split()),
        observed_at=row["observed_at"],
        event_at=row["event_at"],
        summary=summary,
        data=data if data is not None else json.loads(row["data"]),
    )


class HmActivityStore:
    """The feed: events in observed order, ListEvents pages of them, and who to tell when some are added."""

    def __init__(self, db: Store) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def listen(self, callback: Callable[[], None]) -> None:
        """Call `callback()` after each commit that added events (on the committing thread: it must not block)."""
        with self._lock:
            self._listeners.append(callback)

    def notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for callback in listeners:
            try:
                callback()
            except Exception:
                # A listener's failure is its own: the commit stands and the other listeners are still told.
                logger.exception("An activity listener failed")

    def after(self, seq: int, limit: int) -> list[ActivityEvent]:
        """The events after `seq`, oldest first, at most `limit`, their data resolved as a page of ListEvents."""
        from mcp_harness.store.hm_activity_view import resolve

        with self._db.reading() as conn:
            rows = conn.execute("SELECT * FROM hm_activity WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)).fetchall()
            resolved = resolve(conn, rows, None)
        return [row_event(row, data) for row, data in zip(rows, resolved, strict=True)]

    def latest_seq(self) -> int:
        """The seq of the newest event (0 when there is none): where a monitor starting now resumes from."""
        with self._db.reading() as conn:
            return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM hm_activity").fetchone()[0])

    def list_events(self, **params: Any) -> dict[str, Any]:
        """A ListEvents page (HYPERMEDIA §4): see `hm_activity_view.list_events` for the parameters."""
        from mcp_harness.store.hm_activity_view import list_events

        with self._db.reading() as conn:
            return list_events(conn, **params)
