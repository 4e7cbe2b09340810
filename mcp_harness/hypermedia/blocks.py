"""The Seed block model (HYPERMEDIA §3): blocks, annotations, trees, and their two wire shapes.

A document's content is a tree of blocks. The same block travels in two shapes, and this module is the one place that
converts between them and the frozen dataclasses the rest of the package works with:

- the **API shape** (`HMBlockNode {block, children}`, what `read … format: "json"` returns and the Seed web API
  serves): attributes nested under `block.attributes`;
- the **op shape** (the block map inside a `ReplaceBlock` op of a signed Change): every attribute inlined at the top
  level beside `id`, `type`, `text`, `link` and `annotations`.

Annotation offsets are Unicode code points (HYPERMEDIA §3: the editor's convention; the JS markdown parser's UTF-16
offsets are a latent bug we do not copy).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BLOCK_KNOWN_KEYS = frozenset({"id", "type", "text", "link", "annotations"})
"""Keys of an op-shape block map that are not attributes (Go's `blob_change.go:561-622`)."""
ANNOTATION_KNOWN_KEYS = frozenset({"type", "starts", "ends", "link"})
CHILDREN_TYPES = ("Group", "Ordered", "Unordered", "Blockquote", "Grid")
ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


def new_block_id() -> str:
    """A fresh block id: 8 characters of `[A-Za-z0-9_-]`, as the official client generates them."""
    # 64 characters, so each random byte's low six bits pick one uniformly: one urandom call instead of eight.
    return "".join(ID_CHARS[b & 63] for b in secrets.token_bytes(8))


@dataclass(frozen=True, slots=True)
class Annotation:
    """An inline span (Bold, Italic, Link, Embed, …) over code-point ranges of a block's text."""

    type: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    link: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """Inline attributes such as `value` of TextColor; inlined in the op shape, nested in the API shape."""


@dataclass(frozen=True, slots=True)
class Block:
    """One block: its identity, type, text with annotations, link, and every other attribute."""

    id: str
    type: str
    text: str = ""
    link: str | None = None
    annotations: tuple[Annotation, ...] = ()
    attributes: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """`childrenType`, `language`, `width`, `name`, `view`, `columnId`, `isHeader`, `query`, …"""

    @property
    def children_type(self) -> str | None:
        value = self.attributes.get("childrenType")
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class BlockNode:
    """A block and its ordered children."""

    block: Block
    children: tuple[BlockNode, ...] = ()


def walk(tree: Sequence[BlockNode]) -> Iterator[tuple[str, BlockNode]]:
    """Every node of a tree in document order, with its parent's block id (`""` at the root)."""
    stack: list[tuple[str, BlockNode]] = [("", node) for node in reversed(tree)]
    while stack:
        parent, node = stack.pop()
        yield parent, node
        stack.extend((node.block.id, child) for child in reversed(node.children))


# --- API shape ------------------------------------------------------------------------------------------------------


def annotation_to_json(annotation: Annotation) -> dict[str, Any]:
    out: dict[str, Any] = {"type": annotation.type, "starts": list(annotation.starts), "ends": list(annotation.ends)}
    if annotation.link is not None:
        out["link"] = annotation.link
    if annotation.attributes:
        out["attributes"] = dict(annotation.attributes)
    return out


def block_to_json(block: Block) -> dict[str, Any]:
    """The API shape of a block (`HMBlock`): attributes nested, `link` only when set."""
    out: dict[str, Any] = {
        "type": block.type,
        "id": block.id,
        "text": block.text,
        "annotations": [annotation_to_json(a) for a in block.annotations],
        "attributes": dict(block.attributes),
    }
    if block.link is not None:
        out["link"] = block.link
    return out


def tree_to_json(tree: Sequence[BlockNode]) -> list[dict[str, Any]]:
    """The API shape of a tree (`HMBlockNode[]`); `children` only on nodes that have some, as the JS client does."""
    out: list[dict[str, Any]] = []
    for node in tree:
        item: dict[str, Any] = {"block": block_to_json(node.block)}
        if node.children:
            item["children"] = tree_to_json(node.children)
        out.append(item)
    return out


def annotation_from_json(value: Mapping[str, Any]) -> Annotation:
    attributes = value.get("attributes")
    return Annotation(
        type=str(value.get("type", "")),
        starts=tuple(int(n) for n in value.get("starts") or ()),
        ends=tuple(int(n) for n in value.get("ends") or ()),
        link=value.get("link") if isinstance(value.get("link"), str) else None,
        attributes=dict(attributes) if isinstance(attributes, Mapping) else {},
    )


def block_from_json(value: Mapping[str, Any]) -> Block:
    attributes = value.get("attributes")
    return Block(
        id=str(value.get("id", "")),
        type=str(value.get("type", "")),
        text=str(value.get("text") or ""),
        link=value.get("link") if isinstance(value.get("link"), str) else None,
        annotations=tuple(annotation_from_json(a) for a in value.get("annotations") or ()),
        attributes=dict(attributes) if isinstance(attributes, Mapping) else {},
    )


def tree_from_json(value: list[Mapping[str, Any]]) -> tuple[BlockNode, ...]:
    return tuple(
        BlockNode(block_from_json(item["block"]), tree_from_json(item.get("children") or [])) for item in value
    )


# --- op shape -------------------------------------------------------------------------------------------------------


def annotation_to_op(annotation: Annotation) -> dict[str, Any]:
    out: dict[str, Any] = {
        **annotation.attributes,
        "type": annotation.type,
        "starts": list(annotation.starts),
        "ends": list(annotation.ends),
    }
    if annotation.link is not None:
        out["link"] = annotation.link
    return out


def block_to_op(block: Block) -> dict[str, Any]:
    """The block map of a `ReplaceBlock` op: attributes inlined, `text` and `annotations` always present (as the JS
    client writes them), `link` only when set."""
    out: dict[str, Any] = {
        **block.attributes,
        "type": block.type,
        "id": block.id,
        "text": block.text,
        "annotations": [annotation_to_op(a) for a in block.annotations],
    }
    if block.link is not None:
        out["link"] = block.link
    return out


def annotation_from_op(value: Mapping[str, Any]) -> Annotation:
    attributes = {k: v for k, v in value.items() if k not in ANNOTATION_KNOWN_KEYS}
    nested = attributes.pop("attributes", None)
    if isinstance(nested, Mapping):
        attributes = {**nested, **attributes}
    link = value.get("link")
    return Annotation(
        type=str(value.get("type", "")),
        starts=tuple(int(n) for n in value.get("starts") or ()),
        ends=tuple(int(n) for n in value.get("ends") or ()),
        link=link if isinstance(link, str) and link else None,
        attributes=attributes,
    )


def block_from_op(value: Mapping[str, Any]) -> Block:
    """A block from its op map, accepting the legacy forms Go still reads (`iD`, a nested `attributes` map)."""
    attributes = {k: v for k, v in value.items() if k not in BLOCK_KNOWN_KEYS and k != "iD"}
    nested = attributes.pop("attributes", None)
    if isinstance(nested, Mapping):
        attributes = {**nested, **attributes}
    link = value.get("link")
    block_id = value.get("id") or value.get("iD") or ""
    return Block(
        id=str(block_id),
        type=str(value.get("type", "")),
        text=str(value.get("text") or ""),
        link=link if isinstance(link, str) and link else None,
        annotations=tuple(annotation_from_op(a) for a in value.get("annotations") or () if isinstance(a, Mapping)),
        attributes=attributes,
    )
