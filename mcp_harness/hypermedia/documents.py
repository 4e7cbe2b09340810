"""Document state from signed Changes: the block tree and metadata a version denotes (HYPERMEDIA §1.2).

Changes are applied in a topological order (depth first, then timestamp, then CID), which is the order their deps
force for a linear history and a deterministic one for concurrent heads. The ops:

- `SetAttributes` writes document metadata (`key` is a path: `["theme", "headerLayout"]`; a null value removes it);
- `ReplaceBlock` sets a block's content (the latest write wins);
- `MoveBlocks` places blocks under a parent, in order, at the start of its list when it has no `ref` — the form the
  official client writes (one full sibling list per level), which leaves every listed block in exactly that order;
- `DeleteBlocks` moves blocks to the trash, i.e. out of the tree.

A `MoveBlocks` with an explicit RGA `ref` (the Go daemon's own writer uses them) is placed after the block that the
referenced op moved when that op is known, else at the end of the list: exact for linear histories written with
refs to earlier ops, an approximation of RGA's tie-break only for concurrent branches. The embedded node only
ingests blobs it signs itself, which never carry refs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.blocks import Block, BlockNode, block_from_op

TRASH = "◊"


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """What applying needs of one Change blob."""

    cid: str
    author: str
    ts: int
    depth: int
    deps: tuple[str, ...]
    ops: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class DocumentState:
    """The content a set of changes denotes."""

    tree: tuple[BlockNode, ...]
    metadata: dict[str, Any]
    authors: tuple[str, ...]
    create_time: int
    update_time: int
    heads: tuple[str, ...]
    depth: int
    blocks: Mapping[str, Block] = field(default_factory=dict[str, Block])
    """Every live block by id, for `#block` reads."""


class BlockTree:
    """A document's blocks as the ops leave them: every block ever written (live or in the trash) by id, each
    parent's ordered child list, where each block sits, and the metadata. What `apply` needs and nothing of the
    history that led here, apart from `moved_by` (the op that placed each block, for RGA refs)."""

    def __init__(self) -> None:
        self.metadata: dict[str, Any] = {}
        self.content: dict[str, Block] = {}
        self.children: dict[str, list[str]] = {"": []}
        self.parent_of: dict[str, str] = {}
        self.moved_by: dict[tuple[int, int, str], str] = {}

    def apply(self, change: ChangeRecord, actor: str) -> None:
        """Apply one change's ops in order (`actor` names its author in op ids)."""
        local: list[tuple[int, int, str]] = []
        idx = 0
        for op in change.ops:
            op_id = (change.ts, idx, actor)
            local.append(op_id)
            kind = op.get("type")
            if kind == "SetAttributes":
                self.set_attributes(op)
            elif kind == "SetKey":
                self.set_attributes({"attrs": [{"key": [op.get("key")], "value": op.get("value")}]})
            elif kind == "ReplaceBlock":
                raw = op.get("block")
                if not isinstance(raw, Mapping):
                    raise BadRequest(f"Change {change.cid}: ReplaceBlock needs a block map.")
                block = block_from_op(raw)
                self.content[block.id] = block
            elif kind == "MoveBlocks":
                self.move(op, op_id, local)
                idx += max(len(op.get("blocks") or ()) - 1, 0)
            elif kind == "DeleteBlocks":
                self.delete(op)
            idx += 1

    def set_attributes(self, op: Mapping[str, Any]) -> None:
        if op.get("block"):
            return  # block-level attributes are not supported by Seed either (crdt.go:543-545)
        for attr in op.get("attrs") or ():
            path = [str(part) for part in attr.get("key") or ()]
            if path:
                _set_path(self.metadata, path, attr.get("value"))

    def move(self, op: Mapping[str, Any], op_id: tuple[int, int, str], local: Sequence[tuple[int, int, str]]) -> None:
        parent = str(op.get("parent") or "")
        anchor = self._anchor(op.get("ref"), local)
        ts, idx, actor = op_id
        for offset, block_id in enumerate(str(b) for b in op.get("blocks") or ()):
            if block_id == parent or self._is_ancestor(block_id, parent):
                continue  # a move that would make a cycle is ignored, as the CRDT does
            self._detach(block_id)
            siblings = self.children.setdefault(parent, [])
            position = 0 if anchor is None else (siblings.index(anchor) + 1 if anchor in siblings else len(siblings))
            siblings.insert(position, block_id)
            self.parent_of[block_id] = parent
            anchor = block_id
            self.moved_by[(ts, idx + offset, actor)] = block_id

    def delete(self, op: Mapping[str, Any]) -> None:
        for block_id in (str(b) for b in op.get("blocks") or ()):
            self._detach(block_id)
            self.parent_of[block_id] = TRASH

    def _anchor(self, ref: object, local: Sequence[tuple[int, int, str]]) -> str | None:
        if not isinstance(ref, list) or not ref:
            return None
        if len(ref) == 1 and isinstance(ref[0], int) and 0 <= ref[0] < len(local):
            key = local[ref[0]]
        elif len(ref) == 3:
            key = (int(ref[0]), int(ref[1]), str(ref[2]))
        else:
            return None
        return self.moved_by.get(key)

    def _detach(self, block_id: str) -> None:
        parent = self.parent_of.pop(block_id, None)
        if parent is not None and parent in self.children and block_id in self.children[parent]:
            self.children[parent].remove(block_id)

    def _is_ancestor(self, block_id: str, node: str) -> bool:
        seen = 0
        while node and seen < 10_000:
            if node == block_id:
                return True
            node = self.parent_of.get(node, "")
            seen += 1
        return False

    def tree(self, parent: str = "") -> tuple[BlockNode, ...]:
        nodes: list[BlockNode] = []
        for block_id in self.children.get(parent, ()):
            block = self.content.get(block_id)
            if block is not None:
                nodes.append(BlockNode(block, self.tree(block_id)))
        return tuple(nodes)

    def copy(self) -> BlockTree:
        other = BlockTree()
        other.metadata = copy.deepcopy(self.metadata)
        other.content = dict(self.content)
        other.children = {k: list(v) for k, v in self.children.items()}
        other.parent_of = dict(self.parent_of)
        other.moved_by = dict(self.moved_by)
        return other

    def state(
        self, *, authors: Sequence[str], create_time: int, update_time: int, heads: Sequence[str], depth: int
    ) -> DocumentState:
        """The `DocumentState` of this tree with the aggregates of the changes that made it."""
        live = {block_id: block for block_id, block in self.content.items() if _alive(self, block_id)}
        return DocumentState(
            tree=self.tree(),
            metadata=copy.deepcopy(self.metadata),
            authors=tuple(authors),
            create_time=create_time,
            update_time=update_time,
            heads=tuple(sorted(heads)),
            depth=depth,
            blocks=live,
        )


def _set_path(target: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        nested = target.get(part)
        if not isinstance(nested, dict):
            nested = {}
            target[part] = nested
        target = nested
    if value is None:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value


def order_key(change: ChangeRecord) -> tuple[int, int, str]:
    """Where a change goes in the application order: depth, then timestamp, then CID."""
    return change.depth, change.ts, change.cid


class DocumentBuilder:
    """Changes applied so far, extendable with later ones. Copies are cheap (a few dicts of one document's blocks), so
    a node can keep the builder of a version and apply only the next change to reach the version after it."""

    def __init__(self) -> None:
        self.blocks = BlockTree()
        self.applied: dict[str, ChangeRecord] = {}
        self.last: tuple[int, int, str] | None = None
        self._authors: list[str] = []

    def copy(self) -> DocumentBuilder:
        other = DocumentBuilder()
        other.blocks = self.blocks.copy()
        other.applied = dict(self.applied)
        other.last = self.last
        other._authors = list(self._authors)
        return other

    def can_extend(self, changes: Iterable[ChangeRecord]) -> bool:
        """Whether applying `changes` after what is applied gives the order a fresh build would use."""
        return all(self.last is None or order_key(c) > self.last for c in changes if c.cid not in self.applied)

    def extend(self, changes: Iterable[ChangeRecord], actor_of: Mapping[str, str] | None = None) -> DocumentBuilder:
        """Apply `changes` (those not applied yet) in order. Raises BadRequest on a dep this builder cannot see."""
        pending = sorted((c for c in changes if c.cid not in self.applied), key=order_key)
        known = set(self.applied) | {c.cid for c in pending}
        for change in pending:
            missing = [d for d in change.deps if d not in known]
            if missing:
                raise BadRequest(f"Change {change.cid} depends on {missing[0]}, which this node does not have.")
            self.blocks.apply(change, (actor_of or {}).get(change.author, change.author))
            self.applied[change.cid] = change
            self.last = order_key(change)
            if change.author not in self._authors:
                self._authors.append(change.author)
        return self

    def state(self) -> DocumentState:
        changes = list(self.applied.values())
        if not changes:
            raise BadRequest("A document needs at least its genesis change.")
        depended = {d for c in changes for d in c.deps}
        content_times = [c.ts for c in changes if c.ts > 0]
        return self.blocks.state(
            authors=self._authors,
            create_time=min(content_times) if content_times else 0,
            update_time=max(c.ts for c in changes),
            heads=[c.cid for c in changes if c.cid not in depended],
            depth=max(c.depth for c in changes),
        )

    @property
    def authors(self) -> tuple[str, ...]:
        """Authors in the order their first change was applied."""
        return tuple(self._authors)


def apply_changes(changes: Iterable[ChangeRecord], actor_of: Mapping[str, str] | None = None) -> DocumentState:
    """Apply changes (any order; they are sorted here) to an empty document and return the resulting state.

    Raises:
        BadRequest: a change depends on one that is not among `changes`, or there are none.
    """
    return DocumentBuilder().extend(changes, actor_of).state()


def _alive(builder: BlockTree, block_id: str) -> bool:
    node = block_id
    for _ in range(10_000):
        parent = builder.parent_of.get(node)
        if parent is None or parent == TRASH:
            return False
        if parent == "":
            return True
        node = parent
    return False


def find_block(tree: Sequence[BlockNode], block_id: str) -> BlockNode | None:
    """The node with `block_id`, searched depth-first."""
    stack = list(reversed(tree))
    while stack:
        node = stack.pop()
        if node.block.id == block_id:
            return node
        stack.extend(reversed(node.children))
    return None
