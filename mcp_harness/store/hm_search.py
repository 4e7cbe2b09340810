"""Keyword search over the embedded node (migration m015): document titles and blocks, profiles and comments in FTS5.

Only what is current is indexed. A document's rows are rebuilt from its materialized state (`hm_documents.py`)
whenever its winning Ref or that state changes, so an edited block's old text, a deleted document and the old path
of a moved one stop matching in the same transaction that stored the blobs (`track`, called from
`HypermediaStore.put`). A comment is indexed at its latest version (edits reuse the TSID; a deletion is a version
with no body) and a profile at its newest blob. SQL triggers cannot do this: the text lives inside CBOR snapshots and
blobs that only Python decodes, and a trigger calling a Python function would break every other connection.

Rows: `hm_search_items` says what each row is (kind, account, resource, block) and `hm_search_text` (FTS5, same
rowid) holds its text. `account` is the account in the row's `hm://` id — the space of a document, the author of a
comment, the profile's own account — which is what `accountUid` filters on, as the reference's `hm://<uid>*` glob.
On PostgreSQL the text table is a `tsvector` under GIN keyed by the item's id (`store/keyword_index.py`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mcp_harness.hypermedia.blocks import walk
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.materialized import Snapshot
from mcp_harness.store.keyword_index import index_for

if TYPE_CHECKING:
    from mcp_harness.hypermedia.blobs import Blob

Resource = tuple[str, str]
TOKENIZER = "unicode61 remove_diacritics 2"

SCHEMA = (
    "CREATE TABLE hm_search_items (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, account TEXT NOT NULL, "
    "space TEXT NOT NULL, path TEXT NOT NULL, block TEXT NOT NULL DEFAULT '', tsid TEXT NOT NULL DEFAULT '', "
    "ts INTEGER NOT NULL, cid TEXT NOT NULL)",
    "CREATE INDEX hm_search_items_by_resource ON hm_search_items (space, path, kind)",
    "CREATE INDEX hm_search_items_by_account ON hm_search_items (account, kind, ts)",
    "CREATE INDEX hm_search_items_by_kind ON hm_search_items (kind, ts)",
    f"CREATE VIRTUAL TABLE hm_search_text USING fts5 (text, tokenize = '{TOKENIZER}', prefix = '2 3')",
    # Which Ref (and whether its state was there) each document's rows were built from: a Ref stored without its
    # Changes is indexed once they arrive.
    "CREATE TABLE hm_search_docs (space TEXT NOT NULL, path TEXT NOT NULL, ref TEXT NOT NULL, "
    "has_state INTEGER NOT NULL, PRIMARY KEY (space, path)) WITHOUT ROWID",
    "CREATE INDEX hm_search_docs_stateless ON hm_search_docs (has_state) WHERE has_state = 0",
)


def migrate(conn: sqlite3.Connection) -> None:
    """Create this store's schema and index what the node holds (m015 creates the memory index and the vector cache
    beside it)."""
    for statement in SCHEMA:
        conn.execute(statement)
    backfill(conn)


def backfill(conn: sqlite3.Connection) -> None:
    """Index every resource's current state, every comment's latest version and every account's newest profile."""
    resources = [tuple(r) for r in conn.execute("SELECT space, path FROM hm_documents").fetchall()]
    _refresh_documents(conn, resources)  # pyright: ignore[reportArgumentType]
    latest = conn.execute(
        "SELECT c.cid FROM hm_comments c WHERE NOT EXISTS (SELECT 1 FROM hm_comments d WHERE d.author = c.author "
        "AND d.tsid = c.tsid AND (d.ts > c.ts OR (d.ts = c.ts AND d.cid > c.cid)))"
    ).fetchall()
    for (cid,) in latest:
        _index_comment(conn, cid)
    for (author,) in conn.execute("SELECT DISTINCT author FROM hm_blobs WHERE type = 'Profile'").fetchall():
        _index_profile(conn, author)


def track(
    conn: sqlite3.Connection, blobs: Sequence[Blob], resources: Iterable[Resource], *, changes_arrived: bool
) -> None:
    """Bring the index up to date with one `put` (inside its transaction, after `hm_documents.refresh`): the
    resources its Refs named, documents whose state its Changes completed, and its comments and profiles. A blob
    seen before changes nothing (every step compares with what is indexed)."""
    keys = list(dict.fromkeys(resources))
    if changes_arrived:
        keys += [
            (r[0], r[1])
            for r in conn.execute(
                "SELECT s.space, s.path FROM hm_search_docs s JOIN hm_documents d ON d.space = s.space "
                "AND d.path = s.path WHERE s.has_state = 0 AND d.state IS NOT NULL"
            ).fetchall()
        ]
    _refresh_documents(conn, dict.fromkeys(keys))
    for blob in blobs:
        if blob.type == "Comment":
            _index_comment(conn, str(blob.cid))
        elif blob.type == "Profile":
            _index_profile(conn, blob.author)


def _delete(conn: sqlite3.Connection, where: str, args: Sequence[Any]) -> None:
    key = index_for(conn).key
    conn.execute(f"DELETE FROM hm_search_text WHERE {key} IN (SELECT id FROM hm_search_items WHERE {where})", args)
    conn.execute(f"DELETE FROM hm_search_items WHERE {where}", args)


def _insert(conn: sqlite3.Connection, text: str, *row: Any) -> None:
    item_id = conn.execute(
        "INSERT INTO hm_search_items (kind, account, space, path, block, tsid, ts, cid) VALUES (?,?,?,?,?,?,?,?) "
        "RETURNING id",
        row,
    ).fetchone()[0]
    index_for(conn).add_hm(conn, int(item_id), text)


def _refresh_documents(conn: sqlite3.Connection, resources: Iterable[Resource]) -> None:
    for space, path in resources:
        row = conn.execute(
            "SELECT ref, live, state FROM hm_documents WHERE space = ? AND path = ?", (space, path)
        ).fetchone()
        indexed = conn.execute(
            "SELECT ref, has_state FROM hm_search_docs WHERE space = ? AND path = ?", (space, path)
        ).fetchone()
        if row is None:
            continue
        ref, live, state = row[0], bool(row[1]), row[2]
        has_state = int(state is not None)
        if indexed is not None and indexed[0] == ref and indexed[1] == has_state:
            continue
        _delete(conn, "space = ? AND path = ? AND kind IN ('title', 'document')", (space, path))
        conn.execute(
            "INSERT INTO hm_search_docs (space, path, ref, has_state) VALUES (?,?,?,?) "
            "ON CONFLICT (space, path) DO UPDATE SET ref = excluded.ref, has_state = excluded.has_state",
            (space, path, ref, has_state),
        )
        if live and state is not None:
            for kind, block, text, ts in document_rows(bytes(state)):
                _insert(conn, text, kind, space, space, path, block, "", ts, ref)


def document_rows(state: bytes) -> Iterator[tuple[str, str, str, int]]:
    """(kind, block id, text, ts) of a materialized state: its name as the title, then every live block with text."""
    snapshot = Snapshot.from_bytes(state)
    if snapshot is None:
        return
    document = snapshot.state()
    name = document.metadata.get("name")
    if isinstance(name, str) and name.strip():
        yield "title", "", name, document.update_time
    for _, node in walk(document.tree):
        if node.block.text.strip():
            yield "document", node.block.id, node.block.text, document.update_time


def _index_comment(conn: sqlite3.Connection, cid: str) -> None:
    """Index the comment version `cid` if it is its comment's latest (replacing the one indexed), or drop the
    comment when that latest version deleted it."""
    row = conn.execute("SELECT author, tsid, space, path, ts FROM hm_comments WHERE cid = ?", (cid,)).fetchone()
    if row is None:
        return
    author, tsid, space, path, ts = row
    latest = conn.execute(
        "SELECT c.cid, c.deleted, b.data FROM hm_comments c JOIN hm_blobs b ON b.cid = c.cid "
        "WHERE c.author = ? AND c.tsid = ? ORDER BY c.ts DESC, c.cid DESC LIMIT 1",
        (author, tsid),
    ).fetchone()
    if latest is None or latest[0] != cid:
        return
    indexed = conn.execute(
        "SELECT cid FROM hm_search_items WHERE kind = 'comment' AND account = ? AND tsid = ?", (author, tsid)
    ).fetchone()
    if indexed is not None and indexed[0] == cid:
        return
    _delete(conn, "kind = 'comment' AND account = ? AND tsid = ?", (author, tsid))
    value = decode(bytes(latest[2]))
    text = "\n".join(body_texts(value.get("body") if isinstance(value, dict) else None))
    if not latest[1] and text.strip():
        _insert(conn, text, "comment", author, space, path, "", tsid, ts, cid)


def body_texts(body: object) -> Iterator[str]:
    """The text of every block of a comment body (op-shape block maps, children nested), in order."""
    if not isinstance(body, list):
        return
    for item in body:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(item, dict):
            text = item.get("text")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(text, str) and text.strip():
                yield text
            yield from body_texts(item.get("children"))  # pyright: ignore[reportUnknownMemberType]


def _index_profile(conn: sqlite3.Connection, account: str) -> None:
    """Index the account's newest Profile blob (its name, then its description), replacing an older one."""
    row = conn.execute(
        "SELECT cid, ts, data FROM hm_blobs WHERE type = 'Profile' AND author = ? ORDER BY ts DESC, cid DESC LIMIT 1",
        (account,),
    ).fetchone()
    if row is None:
        return
    indexed = conn.execute(
        "SELECT cid FROM hm_search_items WHERE kind = 'profile' AND account = ?", (account,)
    ).fetchone()
    if indexed is not None and indexed[0] == row[0]:
        return
    _delete(conn, "kind = 'profile' AND account = ?", (account,))
    value = decode(bytes(row[2]))
    value = value if isinstance(value, dict) else {}
    parts = [value.get(k) for k in ("name", "description")]
    text = "\n".join(p for p in parts if isinstance(p, str) and p.strip())
    if text:
        _insert(conn, text, "profile", account, account, "", "", "", row[1], row[0])
