"""The embedded hypermedia node: resolve documents, comments and profiles; sign and store what an agent publishes.

This is the local stand-in for a Seed daemon and its web API: every blob it holds is signed and verified exactly as a
Seed node would (so it can be pushed to one unchanged), documents are the state their Refs and Changes denote, and
publishing follows the daemon's conventions (the ts=0 genesis for every document, the generation reused on update
and bumped only when a resource is created anew, one Change per write with `deps` = the current heads).

The current version of each document is materialized in the store as Refs and Changes arrive
(`hypermedia/materialized.py`), so reading or editing it costs the document, not its history; an old version
(`?v=`) is still rebuilt from its changes, helped by the caches below.

Plain synchronous code over the store: verbs call it on a worker thread, inside their own transaction.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.errors import BadRequest, Conflict, NotFound
from mcp_harness.hypermedia import blobs, ingest_gate
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.blocks import BlockNode, block_from_op, comment_blocks, tree_to_json
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.documents import ChangeRecord, DocumentBuilder, DocumentState
from mcp_harness.hypermedia.ids import version_string
from mcp_harness.hypermedia.materialized import Snapshot
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store._util import iso_time
from mcp_harness.store.db import Database
from mcp_harness.store.hypermedia import CommentRow, HypermediaStore, RefRow

MAX_REDIRECTS = 5
MAX_CACHED_CHANGES = 8192
MAX_CACHED_VERSIONS = 64
MAX_BLOB_BYTES = 4 * 1024 * 1024
"""`[hypermedia] max_blob_bytes`' default: the largest single blob `ingest` takes."""
MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""`[hypermedia] max_request_bytes`' default: the largest batch `ingest` takes at once."""

PublishHook = Callable[[Sequence[Blob]], None]
"""Called inside `publish`'s transaction with the blobs just stored (the push queue, `hypermedia/sync/push.py`)."""


def hm_url(space: str, path: str) -> str:
    return f"hm://{space}{path}"


@dataclass(frozen=True, slots=True)
class Document:
    """A document at a version, with the Ref that made it current."""

    space: str
    path: str
    ref: RefRow
    state: DocumentState

    @property
    def id(self) -> str:
        return hm_url(self.space, self.path)

    @property
    def version(self) -> str:
        return version_string(self.state.heads)

    @property
    def name(self) -> str:
        name = self.state.metadata.get("name")
        return name if isinstance(name, str) else ""

    def to_json(self) -> dict[str, Any]:
        """The Seed API's document shape (`HMDocument`)."""
        return {
            "type": "document",
            "id": self.id,
            "account": self.space,
            "path": self.path,
            "version": self.version,
            "authors": list(self.state.authors),
            "createTime": iso_time(self.state.create_time or self.ref.ts),
            "updateTime": iso_time(self.state.update_time or self.ref.ts),
            "metadata": self.state.metadata,
            "genesis": self.ref.genesis,
            "generationInfo": {"genesis": self.ref.genesis, "generation": self.ref.generation},
            "visibility": "Public",
            "content": tree_to_json(self.state.tree),
        }


@dataclass(frozen=True, slots=True)
class Comment:
    row: CommentRow
    value: dict[str, Any]

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def body(self) -> list[dict[str, Any]]:
        body = self.value.get("body")
        return [b for b in body if isinstance(b, dict)] if isinstance(body, list) else []


class Node:
    """Reads and writes of the embedded node. Methods block; safe to call from several threads.

    Document states, decoded Changes and built versions are cached in memory. All are keyed by content hashes (a
    CID, a set of head CIDs), so an entry can never go stale; a version one edit past a cached build is built by
    applying just that edit to a copy, so reading old versions in turn does not replay the whole history each time.
    """

    def __init__(
        self, db: Database, *, max_blob_bytes: int = MAX_BLOB_BYTES, max_request_bytes: int = MAX_REQUEST_BYTES
    ) -> None:
        self._db = db
        self.max_blob_bytes = max_blob_bytes
        self.max_request_bytes = max_request_bytes
        self.publish_hooks: list[PublishHook] = []
        """Run in `publish`'s transaction, so what they record (blobs owed to a server) stands or falls with it."""
        self.store = HypermediaStore(db)
        self.activity = self.store.activity
        """The activity feed: events recorded as blobs are stored, ours and ingested alike (`store/hm_activity.py`)."""
        self._lock = threading.Lock()
        self._records: OrderedDict[str, ChangeRecord] = OrderedDict()
        self._versions: OrderedDict[tuple[str, ...], tuple[DocumentBuilder, DocumentState]] = OrderedDict()
        self._states: OrderedDict[tuple[str, ...], DocumentState] = OrderedDict()

    def on_activity(self, callback: Callable[[], None]) -> None:
        """Call `callback()` after each commit that added feed events (on the committing thread: it must not block;
        read what is new with `activity.after(watermark)`)."""
        self.activity.listen(callback)

    def current_state(self, ref: RefRow, stored: bytes | None = None) -> DocumentState:
        """The state a winning Ref's heads denote: its materialized snapshot (`stored`, else read from the store),
        or a replay when there is none. Raises NotFound if a change is not held here."""
        key = tuple(sorted(ref.heads))
        hit = self._cached(key)
        if hit is not None:
            return hit
        data = stored if stored is not None else self.store.materialized(ref)
        snapshot = Snapshot.from_bytes(data) if data is not None else None
        if snapshot is None:
            return self.state(ref.heads)
        state = snapshot.state()
        with self._lock:
            self._states[key] = state
            while len(self._states) > MAX_CACHED_VERSIONS:
                self._states.popitem(last=False)
        return state

    def _cached(self, key: tuple[str, ...]) -> DocumentState | None:
        with self._lock:
            hit = self._versions.get(key)
            if hit is not None:
                self._versions.move_to_end(key)
                return hit[1]
            state = self._states.get(key)
            if state is not None:
                self._states.move_to_end(key)
            return state

    def state(self, heads: Sequence[str]) -> DocumentState:
        """The document state `heads` denote, rebuilt from its changes. Raises NotFound if one is not held here."""
        key = tuple(sorted(heads))
        hit = self._cached(key)
        if hit is not None:
            return hit
        reachable = self._reachable(key)
        base = self._base_for(reachable)
        builder = (base.copy() if base is not None else DocumentBuilder()).extend(reachable.values())
        state = builder.state()
        with self._lock:
            self._versions[key] = (builder, state)
            while len(self._versions) > MAX_CACHED_VERSIONS:
                self._versions.popitem(last=False)
        return state

    def _reachable(self, heads: Sequence[str]) -> dict[str, ChangeRecord]:
        found: dict[str, ChangeRecord] = {}
        frontier = list(heads)
        while frontier:
            with self._lock:
                cached = {cid: self._records[cid] for cid in frontier if cid in self._records}
            missing = [cid for cid in frontier if cid not in cached]
            loaded = {r.cid: r for r in self.store.change_records(missing)} if missing else {}
            absent = [cid for cid in missing if cid not in loaded]
            if absent:
                raise NotFound(f"Change {absent[0]} is not held by this node.")
            with self._lock:
                for cid, record in loaded.items():
                    self._records[cid] = record
                while len(self._records) > MAX_CACHED_CHANGES:
                    self._records.popitem(last=False)
            level = {**cached, **loaded}
            found.update(level)
            frontier = list(dict.fromkeys(d for r in level.values() for d in r.deps if d not in found))
        return found

    def _base_for(self, reachable: dict[str, ChangeRecord]) -> DocumentBuilder | None:
        """The largest cached build this version extends in order, if any."""
        with self._lock:
            candidates = [builder for builder, _ in self._versions.values()]
        best: DocumentBuilder | None = None
        for builder in candidates:
            if best is not None and len(builder.applied) <= len(best.applied):
                continue
            if all(cid in reachable for cid in builder.applied) and builder.can_extend(reachable.values()):
                best = builder
        return best

    # --- reading ------------------------------------------------------------------------------------------------

    def ref(self, space: str, path: str) -> RefRow | None:
        return self.store.current_ref(space, path)

    def document(self, space: str, path: str, version: str | None = None) -> Document:
        """The document at a path (following redirects), at its latest or a given version.

        Raises:
            NotFound: nothing was ever published there, it was deleted, or the version is unknown here.
        """
        seen: list[str] = []
        ref = self.store.current_ref(space, path)
        while ref is not None and ref.is_redirect and len(seen) < MAX_REDIRECTS:
            seen.append(hm_url(space, path))
            space, path = ref.redirect_space or space, ref.redirect_path or ""
            ref = self.store.current_ref(space, path)
        if ref is None:
            raise NotFound(f"No document at {hm_url(space, path)}: nothing has been published there.")
        if ref.is_redirect:
            raise NotFound(f"{seen[0]} redirects more than {MAX_REDIRECTS} times; not following further.")
        if ref.is_tombstone:
            raise NotFound(f"The document at {hm_url(space, path)} was deleted.")
        heads = list(ref.heads)
        if version:
            # Still a walk of the history (every tip of this generation), even when the version asked is the current.
            heads = [str(CID.parse(part)) for part in version.split(".") if part]
            self._check_version_of(ref, heads, version)
        try:
            state = self.current_state(ref) if set(heads) == set(ref.heads) else self.state(heads)
        except NotFound as missing:
            raise NotFound(f"Version {version} of {hm_url(space, path)} is not known here: {missing.message}") from None
        return Document(space=space, path=path, ref=ref, state=state)

    def _check_version_of(self, ref: RefRow, heads: Sequence[str], version: str) -> None:
        """Refuse a version that is not one of this document's: every head must be a change its Refs reach.

        Every document a key creates starts from the same ts=0 genesis, so the genesis cannot tell documents apart;
        without this, `?v=` of one document would read (and fork, and link) another one's content under this id.
        """
        tips = self.store.ref_heads(ref.space, ref.path, ref.generation)
        try:
            reachable = self._reachable(sorted(tips)) if tips else {}
        except NotFound:
            reachable = {}
        stray = [h for h in heads if h not in reachable]
        if stray:
            raise NotFound(
                f"Version {version} is not a version of {hm_url(ref.space, ref.path)}: change {stray[0]} is not in "
                "its history here. Read the document without ?v= for its current version."
            )

    def children(self, space: str, path: str, *, after: str | None = None, limit: int | None = None) -> list[Document]:
        """The live documents directly below a path, by path: all of them, or a page (those after the path
        `after`, at most `limit`). One index range, whatever else the space holds."""
        return [
            Document(space=space, path=ref.path, ref=ref, state=self.current_state(ref, stored))
            for ref, stored in self.store.live_children(space, path, after, limit)
        ]

    def child_count(self, space: str, path: str) -> int:
        """How many live documents are directly below a path (the total of `children`' pages)."""
        return self.store.live_child_count(space, path)

    def descendant_count(self, space: str, path: str) -> int:
        return self.store.live_descendant_count(space, path)

    def comment(self, author: str, comment_tsid: str) -> Comment:
        found = self.find_comment(author, comment_tsid)
        if found is None:
            raise NotFound(f"No comment hm://{author}/{comment_tsid}.")
        return found

    def find_comment(self, author: str, comment_tsid: str) -> Comment | None:
        """The latest version of a comment, None if none was ever published. Raises NotFound if it was deleted."""
        found = self.store.comment(author, comment_tsid)
        if found is None:
            return None
        row, data = found
        if row.deleted:
            raise NotFound(f"The comment hm://{author}/{comment_tsid} was deleted.")
        return Comment(row, _as_map(decode(data)))

    def comments_page(self, space: str, path: str, *, after: tuple[int, str] | None, limit: int) -> list[Comment]:
        """A page of a document's live comments (the latest version of each), oldest first, after the (ts, cid) of the
        page before."""
        found = self.store.live_comments_page(space, path, after, limit)
        return [Comment(row, _as_map(decode(data))) for row, data in found]

    def comment_count(self, space: str, path: str) -> int:
        return self.store.live_comment_count(space, path)

    def profile(self, account: str) -> dict[str, Any] | None:
        data = self.store.latest_of_type("Profile", account)
        if data is None:
            return None
        value = _as_map(decode(data))
        out: dict[str, Any] = {"id": account, "name": value.get("name") or ""}
        for key in ("avatar", "description"):
            if value.get(key):
                out[key] = value[key]
        out["updateTime"] = iso_time(int(value.get("ts") or 0))
        return out

    # --- publishing -------------------------------------------------------------------------------------------------

    def publish(self, published: Sequence[Blob]) -> list[str]:
        """Store blobs this process built (`blobs.sign_blob` checked each one as it signed it), and run the publish
        hooks in the same transaction."""
        with self._db.transaction():
            stored = self.store.put(published)
            for hook in self.publish_hooks:
                hook(published)
        return stored

    def ingest(
        self,
        items: Sequence[tuple[bytes, str | None]],
        *,
        max_blob_bytes: int | None = None,
        max_request_bytes: int | None = None,
    ) -> list[str]:
        """Verify and store blobs from elsewhere, all or none: `(bytes, cid or None)` pairs, as Seed's PublishBlobs
        takes them. This is the one gate for every blob that arrives (pull, push received, PublishBlobs).

        Checked before anything is stored: the batch's and each blob's size (`[hypermedia] max_request_bytes`,
        `max_blob_bytes`); each signed blob's hash, structure and signature (`blobs.verify_blob`); that a Ref or
        Change signed by someone other than the space's owner is backed by a WRITER/AGENT capability (in the batch
        or held here). Comments need none: anyone may comment. IPFS blocks (raw or dag-pb, named by their CID: a
        file a document links) are hash-checked and go to the block store.

        Raises:
            TooLarge: the batch or one blob is over its cap.
            BadRequest: the first blob that fails, named by its CID (or position) and why.
        """
        checked = ingest_gate.verify_items(
            items, max_blob_bytes or self.max_blob_bytes, max_request_bytes or self.max_request_bytes
        )
        ingest_gate.check_writers(checked.blobs, self.store)
        if checked.blocks:
            # Content-addressed and unreferenced until a Change links them: a failure below leaves only garbage.
            from mcp_harness.store.ipfs_blocks import IpfsBlockStore

            IpfsBlockStore(self._db).put_many(checked.blocks)
        return [str(cid) for cid, _ in checked.blocks] + self.store.put(checked.blobs)

    def create(self, key: KeyPair, space: str, path: str, ops: list[dict[str, Any]]) -> list[Blob]:
        """Blobs that create a document: the genesis, one Change with every op, and a Ref. A deleted document or a
        redirect at the path is replaced (the new Ref's generation wins over it).

        Raises:
            Conflict: a live document is already at that path.
        """
        existing = self.store.current_ref(space, path)
        if existing is not None and not existing.is_tombstone and not existing.is_redirect:
            raise Conflict(
                f'A document already exists at {hm_url(space, path)}. Use options.action "update" to revise it.'
            )
        genesis = blobs.genesis_change(key)
        ts = self._next_ts(key, 0)
        change = blobs.change(key, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=ops, ts=ts)
        # A new generation wins over whatever an earlier, deleted document at this path left behind.
        generation = max(ts, (existing.generation + 1) if existing else 0)
        ref = blobs.ref(
            key, space=space, path=path, genesis=genesis.cid, heads=[change.cid], generation=generation, ts=ts
        )
        return [genesis, change, ref]

    def update(self, key: KeyPair, document: Document, ops: list[dict[str, Any]]) -> list[Blob]:
        """A Change on top of the current heads and a Ref reusing the document's generation (the daemon's rule)."""
        genesis = _genesis(document.ref)
        deps = [CID.parse(h) for h in document.state.heads]
        ts = self._next_ts(key, document.state.update_time)
        change = blobs.change(key, genesis=genesis, deps=deps, depth=document.state.depth + 1, ops=ops, ts=ts)
        ref = blobs.ref(
            key,
            space=document.space,
            path=document.path,
            genesis=genesis,
            heads=[change.cid],
            generation=document.ref.generation,
            ts=max(ts, document.ref.ts + 1),
        )
        return [change, ref]

    def tombstone(self, key: KeyPair, document: Document) -> Blob:
        ts = self._next_ts(key, document.ref.ts)
        return blobs.ref(
            key,
            space=document.space,
            path=document.path,
            genesis=_genesis(document.ref),
            heads=[],
            generation=document.ref.generation,
            ts=ts,
        )

    def redirect(self, key: KeyPair, document: Document, to_space: str, to_path: str) -> Blob:
        target: dict[str, Any] = {"path": to_path}
        if to_space != document.space:
            target["space"] = to_space
        ts = self._next_ts(key, document.ref.ts)
        return blobs.ref(
            key,
            space=document.space,
            path=document.path,
            genesis=_genesis(document.ref),
            heads=[],
            generation=document.ref.generation,
            ts=ts,
            redirect=target,
        )

    def move(self, key: KeyPair, document: Document, to_path: str) -> list[Blob]:
        """The document's heads under a new path, and a redirect left at the old one. A deleted document or a
        redirect at the new path is replaced (so a move can be undone by moving back)."""
        existing = self.store.current_ref(document.space, to_path)
        if existing is not None and not existing.is_tombstone and not existing.is_redirect:
            raise Conflict(f"Cannot move to {hm_url(document.space, to_path)}: a document is already there.")
        ts = self._next_ts(key, document.ref.ts)
        generation = max(document.ref.generation, (existing.generation + 1) if existing else 0)
        moved = blobs.ref(
            key,
            space=document.space,
            path=to_path,
            genesis=_genesis(document.ref),
            heads=[CID.parse(h) for h in document.state.heads],
            generation=generation,
            ts=ts,
        )
        return [moved, self.redirect(key, document, document.space, to_path)]

    def comment_blob(
        self,
        key: KeyPair,
        document: Document,
        body: list[dict[str, Any]],
        reply_to: Comment | None = None,
    ) -> Blob:
        thread_root = reply_parent = None
        if reply_to is not None:
            reply_parent = CID.parse(reply_to.row.cid)
            thread_root = CID.parse(reply_to.row.thread_root) if reply_to.row.thread_root else reply_parent
        return blobs.comment(
            key,
            space=document.space,
            path=document.path,
            version=[CID.parse(h) for h in document.state.heads],
            body=body,
            ts=self._next_ts(key, 0),
            thread_root=thread_root,
            reply_parent=reply_parent,
        )

    def profile_blob(self, key: KeyPair, name: str, avatar: str | None = None, description: str | None = None) -> Blob:
        return blobs.profile(key, name=name, avatar=avatar, description=description, ts=self._next_ts(key, 0))

    def _next_ts(self, key: KeyPair, floor: int) -> int:
        # Seed refuses a change whose ts is not above its deps', and a signer's ts going backwards: millisecond clocks
        # collide on fast successive writes, so step past both.
        latest = self.store.latest_ts(key.account_id)
        return max(blobs.now_ms(), floor + 1, latest + 1)


def _genesis(ref: RefRow) -> CID:
    if ref.genesis is None:
        raise BadRequest(f"The Ref at {hm_url(ref.space, ref.path)} names no genesis; it cannot be revised here.")
    return CID.parse(ref.genesis)


def _as_map(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def comment_body(tree: Sequence[BlockNode]) -> list[dict[str, Any]]:
    """A comment's body as the official client writes it (`blocks.comment_blocks`): block maps with their children
    nested inline, `children: []` on a leaf. Raises BadRequest for a block type a comment cannot hold, or when
    nothing is left once empty blocks are dropped (an empty body is how a comment is deleted)."""
    body = comment_blocks(tree)
    if not body:
        raise BadRequest("A comment needs content: every block of this one is empty.")
    return body


def comment_tree(body: Sequence[dict[str, Any]]) -> tuple[BlockNode, ...]:
    nodes: list[BlockNode] = []
    for item in body:
        block = block_from_op({k: v for k, v in item.items() if k != "children"})
        nodes.append(BlockNode(block, comment_tree(item.get("children") or [])))
    return tuple(nodes)
