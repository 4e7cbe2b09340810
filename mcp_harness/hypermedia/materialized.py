"""A document's state kept between changes, so an edit or a cold read costs the change, not the document's history.

Replaying every Change of a document on each edit or first read grew with its versions (issue 15). The store now
keeps, for the winning Ref of each resource, the `Snapshot` its heads denote (`store/hm_documents.py`): the block
tree as the ops leave it (every block ever written, live or in the trash, each parent's ordered children, the
metadata) and the aggregates `DocumentState` reports (heads, depth, first and last content times, authors), plus the
order key of the last change applied. A new version is reached from the snapshot of the one it builds on by
applying only the changes in between (`advance`) — when that is exactly what a full replay would do:

- a full replay applies every change in `order_key` order, so the new changes must all sort after the last one
  applied (true of a linear history, where each change is deeper than its deps);
- the walk back from the new heads must reach every old head and nothing older than them;
- no new change may carry an RGA `ref` on a `MoveBlocks` (the snapshot does not keep which op moved which block,
  which only such refs consult; our own writer never sets one).

Anything else — a merge of a concurrent branch, a Ref rolled back to an older version — is replayed in full
(`documents.DocumentBuilder`, the reference semantics), and so are reads of an old version (`?v=`): the node only
materializes what each resource's winning Ref names.

The snapshot is stored as CBOR in cbor2's plain mode, which keeps map order (metadata and attribute order reaches
the JSON a read returns, so it must survive the round trip) and writes each value in the type it was decoded as.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cbor2

from mcp_harness.errors import NotFound
from mcp_harness.hypermedia.blocks import Annotation, Block
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.documents import BlockTree, ChangeRecord, DocumentBuilder, DocumentState, order_key

SNAPSHOT_FORMAT = 1
"""Bumped when the stored shape changes; a snapshot of another format is ignored (the document is replayed)."""
_CID_TAG = 42

Loader = Callable[[Sequence[str]], Mapping[str, ChangeRecord]]
"""The Changes among some CIDs that the node holds, by CID."""


@dataclass(slots=True)
class Snapshot:
    """The state a set of heads denotes, extendable with the changes after them."""

    blocks: BlockTree
    heads: tuple[str, ...]
    depth: int
    create_time: int
    update_time: int
    authors: list[str]
    last: tuple[int, int, str]

    @classmethod
    def of(cls, builder: DocumentBuilder) -> Snapshot:
        """The snapshot of a full replay (the aggregates exactly as `DocumentBuilder.state` computes them)."""
        changes = list(builder.applied.values())
        assert changes and builder.last is not None
        depended = {d for c in changes for d in c.deps}
        content_times = [c.ts for c in changes if c.ts > 0]
        return cls(
            blocks=builder.blocks,
            heads=tuple(sorted(c.cid for c in changes if c.cid not in depended)),
            depth=max(c.depth for c in changes),
            create_time=min(content_times) if content_times else 0,
            update_time=max(c.ts for c in changes),
            authors=list(builder.authors),
            last=builder.last,
        )

    def extend(self, changes: Iterable[ChangeRecord]) -> None:
        """Apply changes that all sort after `last` and whose deps are applied or among them (`advance` checks)."""
        pending = sorted(changes, key=order_key)
        for change in pending:
            self.blocks.apply(change, change.author)
            self.last = order_key(change)
            if change.author not in self.authors:
                self.authors.append(change.author)
        # A dep is always applied already (a full replay refuses one that is not), so no new change is an old
        # change's dep: the new tips are the old ones and the new changes, minus what the new changes depend on.
        depended = {d for c in pending for d in c.deps}
        self.heads = tuple(sorted(h for h in {*self.heads, *(c.cid for c in pending)} if h not in depended))
        self.depth = max(self.depth, *(c.depth for c in pending))
        self.update_time = max(self.update_time, *(c.ts for c in pending))
        times = [t for t in (self.create_time, *(c.ts for c in pending)) if t > 0]
        self.create_time = min(times) if times else 0

    def state(self) -> DocumentState:
        return self.blocks.state(
            authors=self.authors,
            create_time=self.create_time,
            update_time=self.update_time,
            heads=self.heads,
            depth=self.depth,
        )

    # --- stored form ------------------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        tree = self.blocks
        return cbor2.dumps(
            [
                SNAPSHOT_FORMAT,
                tree.metadata,
                [_block_row(block) for block in tree.content.values()],
                [[parent, ids] for parent, ids in tree.children.items()],
                [[block_id, parent] for block_id, parent in tree.parent_of.items()],
                list(self.heads),
                self.depth,
                self.create_time,
                self.update_time,
                self.authors,
                list(self.last),
            ],
            default=_encode_cid,
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Snapshot | None:
        """The stored snapshot, or None when it is of another format."""
        row = cbor2.loads(data, tag_hook=_decode_cid)
        if not isinstance(row, list) or not row or row[0] != SNAPSHOT_FORMAT:
            return None
        _, metadata, blocks, children, parents, heads, depth, create_time, update_time, authors, last = row
        tree = BlockTree()
        tree.metadata = metadata
        tree.content = {block.id: block for block in map(_block_of, blocks)}
        tree.children = {parent: list(ids) for parent, ids in children}
        tree.parent_of = dict(parents)
        return cls(
            blocks=tree,
            heads=tuple(heads),
            depth=depth,
            create_time=create_time,
            update_time=update_time,
            authors=list(authors),
            last=(last[0], last[1], last[2]),
        )


def materialize(heads: Sequence[str], load: Loader, base: Snapshot | None = None) -> Snapshot:
    """The snapshot `heads` denote: `base` advanced by the changes after it when that is exact, else a full replay.
    `base` may be changed in place.

    Raises:
        NotFound: a change the heads reach is not held.
        BadRequest: a change cannot be applied (as a read would refuse it).
    """
    if base is not None:
        new = _since(base, set(heads), load)
        if new is not None:
            if new:
                base.extend(new)
            return base
    return Snapshot.of(DocumentBuilder().extend(reachable(heads, load).values()))


def needs_replay(change: ChangeRecord) -> bool:
    """Whether a change places blocks relative to an earlier op (an RGA `ref`), which only a replay resolves."""
    return any(op.get("type") == "MoveBlocks" and isinstance(op.get("ref"), list) and op["ref"] for op in change.ops)


def reachable(heads: Iterable[str], load: Loader) -> dict[str, ChangeRecord]:
    """Every change `heads` reach through their deps. Raises NotFound for the first one not held."""
    found: dict[str, ChangeRecord] = {}
    frontier = list(dict.fromkeys(heads))
    while frontier:
        level = _load_all(frontier, load)
        found.update(level)
        frontier = list(dict.fromkeys(d for r in level.values() for d in r.deps if d not in found))
    return found


def _since(base: Snapshot, target: set[str], load: Loader) -> list[ChangeRecord] | None:
    """The changes `target` reaches beyond `base`'s heads, or None when applying them after `base` would not give
    what a full replay gives (see the module docstring)."""
    old = set(base.heads)
    reached = target & old
    new: dict[str, ChangeRecord] = {}
    frontier = [cid for cid in target if cid not in old]
    while frontier:
        following: list[str] = []
        for record in _load_all(frontier, load).values():
            if order_key(record) <= base.last or needs_replay(record):
                return None
            new[record.cid] = record
            for dep in record.deps:
                if dep in old:
                    reached.add(dep)
                else:
                    following.append(dep)
        frontier = [cid for cid in dict.fromkeys(following) if cid not in new]
    return list(new.values()) if reached == old else None


def _load_all(cids: Sequence[str], load: Loader) -> Mapping[str, ChangeRecord]:
    loaded = load(cids)
    absent = [cid for cid in cids if cid not in loaded]
    if absent:
        raise NotFound(f"Change {absent[0]} is not held by this node.")
    return loaded


def _block_row(block: Block) -> list[Any]:
    annotations = [[a.type, list(a.starts), list(a.ends), a.link, a.attributes] for a in block.annotations]
    return [block.id, block.type, block.text, block.link, annotations, block.attributes]


def _block_of(row: list[Any]) -> Block:
    block_id, kind, text, link, annotations, attributes = row
    return Block(
        id=block_id,
        type=kind,
        text=text,
        link=link,
        annotations=tuple(
            Annotation(type=t, starts=tuple(starts), ends=tuple(ends), link=a_link, attributes=attrs)
            for t, starts, ends, a_link, attrs in annotations
        ),
        attributes=attributes,
    )


def _encode_cid(encoder: Any, value: object) -> None:
    if not isinstance(value, CID):
        raise TypeError(f"Cannot store a {type(value).__name__} in a document snapshot.")
    encoder.encode(cbor2.CBORTag(_CID_TAG, value.to_bytes()))


def _decode_cid(decoder: Any, tag: Any) -> object:
    return CID.from_bytes(tag.value) if tag.tag == _CID_TAG else tag
