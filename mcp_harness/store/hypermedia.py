"""The embedded hypermedia node's storage: verified blobs by CID and the index rows derived from them.

`put` takes blobs that have already been built or verified (`hypermedia.blobs`), so the only way in is through a
signature check. Index rows are derived from the blob's decoded value in the same transaction as the blob itself:
a blob is either fully indexed or absent, never half-known. That includes each resource's winning Ref and the
materialized state of its heads (`hm_documents.py`), so reading or editing the current version of a document never
replays its history. Methods block; call them off the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.documents import ChangeRecord
from mcp_harness.hypermedia.ids import tsid
from mcp_harness.identity.keys import account_id
from mcp_harness.store import hm_documents, hm_search
from mcp_harness.store._util import now_ms
from mcp_harness.store.hm_activity import HmActivityStore, record_activity
from mcp_harness.store.port import Connection, Store

if TYPE_CHECKING:
    from mcp_harness.hypermedia.blobs import Blob


@dataclass(frozen=True, slots=True)
class RefRow:
    """One Ref: which version of which document a signer says is current at a path."""

    cid: str
    space: str
    path: str
    author: str
    genesis: str | None
    heads: tuple[str, ...]
    generation: int
    ts: int
    redirect_space: str | None
    redirect_path: str | None

    @property
    def is_redirect(self) -> bool:
        return self.redirect_space is not None

    @property
    def is_tombstone(self) -> bool:
        return not self.heads and not self.is_redirect


@dataclass(frozen=True, slots=True)
class CommentRow:
    cid: str
    tsid: str
    author: str
    space: str
    path: str
    thread_root: str | None
    reply_parent: str | None
    ts: int
    deleted: bool

    @property
    def id(self) -> str:
        return f"{self.author}/{self.tsid}"


def principal_account(principal: object) -> str:
    """The account id a principal (`0xed 0x01 ‖ key`) names."""
    assert isinstance(principal, bytes) and len(principal) == 34
    return account_id(principal[2:])


def _link(value: object) -> str | None:
    return str(value) if isinstance(value, CID) else None


def _ref_row(row: Any) -> RefRow:
    return RefRow(
        cid=row["cid"],
        space=row["space"],
        path=row["path"],
        author=row["author"],
        genesis=row["genesis"],
        heads=tuple(h for h in row["heads"].split(".") if h),
        generation=row["generation"],
        ts=row["ts"],
        redirect_space=row["redirect_space"],
        redirect_path=row["redirect_path"],
    )


def _comment_row(row: Any) -> CommentRow:
    return CommentRow(
        cid=row["cid"],
        tsid=row["tsid"],
        author=row["author"],
        space=row["space"],
        path=row["path"],
        thread_root=row["thread_root"],
        reply_parent=row["reply_parent"],
        ts=row["ts"],
        deleted=bool(row["deleted"]),
    )


class HypermediaStore:
    """Blob and index rows of the embedded node."""

    def __init__(self, db: Store) -> None:
        self._db = db
        self.activity = HmActivityStore(db)

    def put(self, blobs: Sequence[Blob]) -> list[str]:
        """Store blobs and their index rows in one transaction; a blob already present is left as it is."""
        stored: list[str] = []
        refs: list[hm_documents.Resource] = []
        changes_arrived = False
        fresh: list[Blob] = []
        with self._db.transaction() as conn:
            for blob in blobs:
                cid = str(blob.cid)
                inserted = conn.execute(
                    "INSERT OR IGNORE INTO hm_blobs (cid, type, author, ts, data, received_at) VALUES (?,?,?,?,?,?)",
                    (cid, blob.type, blob.author, blob.ts, blob.data, now_ms()),
                ).rowcount
                if inserted:
                    fresh.append(blob)
                    resource = self._index(conn, cid, blob)
                    if resource is not None:
                        refs.append(resource)
                    changes_arrived = changes_arrived or blob.type == "Change"
                stored.append(cid)
            # Once per resource and batch, after every blob of the batch is in: a Ref may come before its Change.
            if refs or changes_arrived:
                hm_documents.refresh(conn, refs, changes_arrived=changes_arrived)
            # keyword search sees it at once (hm_search is still typed sqlite3.Connection, not the port's)
            hm_search.track(conn, blobs, refs, changes_arrived=changes_arrived)  # pyright: ignore[reportArgumentType]
            if record_activity(conn, fresh):  # the feed's events, in this transaction; listeners told after it
                self._db.after_commit(self.activity.notify)
        return stored

    def _index(self, conn: Connection, cid: str, blob: Blob) -> hm_documents.Resource | None:
        """Index one new blob; a Ref's resource is returned for `hm_documents.refresh`."""
        value: dict[str, Any] = blob.value
        if blob.type == "Change":
            deps = ".".join(str(d) for d in value.get("deps") or ())
            conn.execute(
                "INSERT INTO hm_changes (cid, genesis, author, ts, depth, deps) VALUES (?,?,?,?,?,?)",
                (cid, _link(value.get("genesis")), blob.author, blob.ts, int(value.get("depth") or 0), deps),
            )
        elif blob.type == "Ref":
            space = principal_account(value["space"]) if "space" in value else blob.author
            redirect = value.get("redirect")
            redirect_space = redirect_path = None
            if isinstance(redirect, dict):
                redirect_space = principal_account(redirect["space"]) if "space" in redirect else space
                redirect_path = str(redirect.get("path") or "")
            conn.execute(
                "INSERT INTO hm_refs (cid, space, path, author, genesis, heads, generation, ts, redirect_space, "
                "redirect_path) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    cid,
                    space,
                    str(value.get("path") or ""),
                    blob.author,
                    _link(value.get("genesisBlob")),
                    ".".join(sorted(str(h) for h in value.get("heads") or ())),
                    int(value.get("generation") or 0),
                    blob.ts,
                    redirect_space,
                    redirect_path,
                ),
            )
            return space, str(value.get("path") or "")
        elif blob.type == "Comment":
            space = principal_account(value["space"]) if "space" in value else blob.author
            thread_root = _link(value.get("threadRoot"))
            conn.execute(
                "INSERT INTO hm_comments (cid, tsid, author, space, path, thread_root, reply_parent, ts, deleted) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    cid,
                    str(value.get("id") or tsid(blob.ts, blob.data)),
                    blob.author,
                    space,
                    str(value.get("path") or ""),
                    thread_root,
                    _link(value.get("replyParent")) or thread_root,
                    blob.ts,
                    int(not value.get("body")),
                ),
            )
        elif blob.type == "Capability":
            conn.execute(
                "INSERT INTO hm_capabilities (cid, space, delegate, path, role, ts) VALUES (?,?,?,?,?,?)",
                (
                    cid,
                    blob.author,
                    principal_account(value["delegate"]),
                    str(value.get("path") or ""),
                    str(value.get("role") or ""),
                    blob.ts,
                ),
            )
        return None

    def data(self, cid: str) -> bytes | None:
        with self._db.reading() as conn:
            row = conn.execute("SELECT data FROM hm_blobs WHERE cid = ?", (cid,)).fetchone()
        return None if row is None else bytes(row["data"])

    def current_ref(self, space: str, path: str) -> RefRow | None:
        """The Ref that wins for a resource: highest generation, then latest timestamp (then CID, for determinism)."""
        with self._db.reading() as conn:
            row = conn.execute(
                "SELECT * FROM hm_refs WHERE space = ? AND path = ? ORDER BY generation DESC, ts DESC, cid DESC "
                "LIMIT 1",
                (space, path),
            ).fetchone()
        return None if row is None else _ref_row(row)

    def ref_heads(self, space: str, path: str, generation: int) -> set[str]:
        """The heads every Ref of one generation of a resource named: the tips of every version that document has
        had at that path (a document deleted and created anew there is another generation)."""
        with self._db.reading() as conn:
            rows = conn.execute(
                "SELECT heads FROM hm_refs WHERE space = ? AND path = ? AND generation = ?", (space, path, generation)
            ).fetchall()
        return {head for row in rows for head in row["heads"].split(".") if head}

    def materialized(self, ref: RefRow) -> bytes | None:
        """The stored snapshot of a resource's state, if `ref` is its winner and the state could be materialized."""
        with self._db.reading() as conn:
            row = conn.execute(
                "SELECT state FROM hm_documents WHERE space = ? AND path = ? AND ref = ?",
                (ref.space, ref.path, ref.cid),
            ).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def live_children(
        self, space: str, path: str, after: str | None = None, limit: int | None = None
    ) -> list[tuple[RefRow, bytes | None]]:
        """The winning Ref and stored snapshot of each live resource directly below `path`, by path: those after
        the path `after`, at most `limit` of them."""
        sql = (
            "SELECT r.*, d.state AS state FROM hm_documents d JOIN hm_refs r ON r.cid = d.ref "
            "WHERE d.space = ? AND d.parent = ? AND d.live = 1 AND d.path > ? ORDER BY d.path"
        )
        args: list[Any] = [space, path, after or ""]
        if limit is not None:  # no LIMIT rather than SQLite's `LIMIT -1`, which PostgreSQL refuses
            sql += " LIMIT ?"
            args.append(limit)
        with self._db.reading() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [(_ref_row(row), None if row["state"] is None else bytes(row["state"])) for row in rows]

    def live_child_count(self, space: str, path: str) -> int:
        """How many live resources are directly below `path`."""
        return self._path_count(space, path, "children")

    def live_descendant_count(self, space: str, path: str) -> int:
        """How many live resources have a path starting with `path + "/"`."""
        return self._path_count(space, path, "descendants")

    def _path_count(self, space: str, path: str, column: str) -> int:
        with self._db.reading() as conn:
            row = conn.execute(f"SELECT {column} FROM hm_path_counts WHERE space = ? AND path = ?", (space, path))
            found = row.fetchone()
        return 0 if found is None else int(found[0])

    def change_records(self, cids: Iterable[str]) -> list[ChangeRecord]:
        """The Changes among `cids` this node holds, decoded for applying (one level: deps are not followed)."""
        with self._db.reading() as conn:
            return list(hm_documents.load_changes(conn, cids).values())

    def comment(self, author: str, comment_tsid: str) -> tuple[CommentRow, bytes] | None:
        """The latest version of a comment (edits and deletions reuse the TSID) with its blob bytes."""
        with self._db.reading() as conn:
            row = conn.execute(
                "SELECT c.*, b.data FROM hm_comments c JOIN hm_blobs b ON b.cid = c.cid "
                "WHERE c.author = ? AND c.tsid = ? ORDER BY c.ts DESC LIMIT 1",
                (author, comment_tsid),
            ).fetchone()
        return None if row is None else (_comment_row(row), bytes(row["data"]))

    _LATEST_ON_TARGET = (
        "c.space = ? AND c.path = ? AND NOT EXISTS (SELECT 1 FROM hm_comments d WHERE d.author = c.author "
        "AND d.tsid = c.tsid AND d.space = c.space AND d.path = c.path "
        "AND (d.ts > c.ts OR (d.ts = c.ts AND d.cid > c.cid)))"
    )
    """A comment's latest version on this document (by ts, then cid): each row found through hm_comments_by_id."""

    def live_comments_page(
        self, space: str, path: str, after: tuple[int, str] | None, limit: int
    ) -> list[tuple[CommentRow, bytes]]:
        """One page of the document's live comments (their latest versions, not deleted), oldest first, after the
        (ts, cid) of the page before."""
        sql = f"SELECT c.*, b.data FROM hm_comments c JOIN hm_blobs b ON b.cid = c.cid WHERE {self._LATEST_ON_TARGET}"
        sql += " AND c.deleted = 0"
        args: list[Any] = [space, path]
        if after is not None:
            sql += " AND (c.ts > ? OR (c.ts = ? AND c.cid > ?))"
            args += [after[0], after[0], after[1]]
        sql += " ORDER BY c.ts, c.cid LIMIT ?"
        args.append(limit)
        with self._db.reading() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [(_comment_row(row), bytes(row["data"])) for row in rows]

    def live_comment_count(self, space: str, path: str) -> int:
        with self._db.reading() as conn:
            sql = f"SELECT COUNT(*) FROM hm_comments c WHERE {self._LATEST_ON_TARGET} AND c.deleted = 0"
            return int(conn.execute(sql, (space, path)).fetchone()[0])

    def latest_of_type(self, kind: str, author: str) -> bytes | None:
        """The newest blob of a type by an author (a profile), as bytes."""
        with self._db.reading() as conn:
            row = conn.execute(
                "SELECT data FROM hm_blobs WHERE type = ? AND author = ? ORDER BY ts DESC, cid DESC LIMIT 1",
                (kind, author),
            ).fetchone()
        return None if row is None else bytes(row["data"])

    def latest_ts(self, author: str) -> int:
        """The newest timestamp of any blob an author signed (0 if none)."""
        with self._db.reading() as conn:
            row = conn.execute("SELECT MAX(ts) FROM hm_blobs WHERE author = ?", (author,)).fetchone()
        return int(row[0] or 0)

    def has_capability(self, space: str, delegate: str, path: str) -> bool:
        """Whether the space owner gave `delegate` a WRITER/AGENT capability covering `path`."""
        with self._db.reading() as conn:
            rows = conn.execute(
                "SELECT path, role FROM hm_capabilities WHERE space = ? AND delegate = ?", (space, delegate)
            ).fetchall()
        for row in rows:
            scope = row["path"]
            if row["role"] not in ("WRITER", "AGENT"):
                continue  # a capability with another role, or none, grants no write
            if row["role"] == "AGENT" or not scope or path == scope or path.startswith(scope + "/"):
                return True
        return False
