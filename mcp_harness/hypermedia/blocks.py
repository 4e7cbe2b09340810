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

from mcp_harness.errors import BadRequest

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


# --- comment shape --------------------------------------------------------------------------------------------------

COMMENT_BLOCK_TYPES = (
    *("Paragraph", "Heading", "Math", "Code", "Image", "Video", "File", "Button", "Embed", "WebEmbed", "Slot"),
)
"""The block types a comment may hold: those the official client's `blockToPublishable` publishes."""
_TEXT_WITH_ANNOTATIONS = frozenset({"Paragraph", "Heading", "Math", "Code", "Image"})
_LINKED = frozenset({"Image", "Video", "File", "Button", "Embed", "WebEmbed"})
_PLAIN_MARKS = frozenset({"Bold", "Italic", "Underline", "Strike", "Code"})
_VALUE_MARKS = ("TextColor", "BackgroundColor", "TextSize", "TextFamily")
"""Annotations carrying a `value`; two of one type with different values may not overlap (the client's
`validateExclusiveAnnotations`)."""


def comment_blocks(tree: Sequence[BlockNode]) -> list[dict[str, Any]]:
    """A comment's body exactly as the official client's `createComment` writes it (`comment.ts`,
    `blockToPublishable`), so the same key, timestamp and content sign to the same bytes:

    - every block carries `children`, `[]` when it has none, and its attributes inlined;
    - Paragraph, Heading, Math, Code and Image keep `text` and `annotations`; Video keeps `text: ""` and no
      annotations; Button its text and no annotations; File, Embed and WebEmbed neither; Slot only its attributes;
    - an empty Paragraph without children or `childrenType` is left out, and so are trailing empty Paragraphs and
      Headings;
    - annotations are the client's: marks as `{type, starts, ends}`, Link and Embed with `link` (`""` if none),
      valued marks with a nested `attributes: {value}`.

    Go's reader accepts both this and the op shape (comments are verified over an opaque map, and a block map's
    unknown keys are attributes), so only byte identity with the client depends on it.

    Raises:
        BadRequest: a block type the client refuses in a comment (Table, Query, Nostr, …) or an annotation type
            it does not know, naming what is accepted.
    """
    out: list[dict[str, Any]] = []
    for node in _trim_trailing_empty(tree):
        block = node.block
        if block.type not in COMMENT_BLOCK_TYPES:
            raise BadRequest(
                f"A comment cannot hold a {block.type} block (the Seed client refuses it); comments take "
                f"{', '.join(COMMENT_BLOCK_TYPES)} blocks."
            )
        if (
            block.type == "Paragraph"
            and not block.text
            and not node.children
            and "childrenType" not in block.attributes
        ):
            continue
        item: dict[str, Any] = {"id": block.id, "type": block.type}
        if block.type in _TEXT_WITH_ANNOTATIONS or block.type == "Button":
            item["text"] = block.text
        elif block.type == "Video":
            item["text"] = ""
        if block.type in _LINKED and block.link is not None:
            item["link"] = block.link
        if block.type in _TEXT_WITH_ANNOTATIONS:
            item["annotations"] = _comment_annotations(block.annotations)
        item.update(block.attributes)
        item["children"] = comment_blocks(node.children) if node.children else []
        out.append(item)
    return out


def _trim_trailing_empty(tree: Sequence[BlockNode]) -> Sequence[BlockNode]:
    end = len(tree)
    while end > 0:
        node = tree[end - 1]
        if node.children or node.block.type not in ("Paragraph", "Heading") or node.block.text.strip():
            break
        end -= 1
    return tree[:end]


def _comment_annotations(annotations: Sequence[Annotation]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for annotation in annotations:
        item: dict[str, Any] = {
            "type": annotation.type,
            "starts": list(annotation.starts),
            "ends": list(annotation.ends),
        }
        if annotation.type in ("Link", "Embed"):
            item["link"] = annotation.link or ""
        elif annotation.type in _VALUE_MARKS:
            item["attributes"] = {"value": annotation.attributes.get("value") or ""}
        elif annotation.type not in _PLAIN_MARKS:
            accepted = ", ".join([*sorted(_PLAIN_MARKS), "Link", "Embed", *_VALUE_MARKS])
            raise BadRequest(f"A comment cannot hold a {annotation.type} annotation; comments take {accepted}.")
        out.append(item)
    for kind in _VALUE_MARKS:
        marks = [a for a in out if a["type"] == kind]
        for i, first in enumerate(marks):
            for second in marks[i + 1 :]:
                same = first["attributes"]["value"] and first["attributes"]["value"] == second["attributes"]["value"]
                if not same and _overlap(first, second):
                    raise BadRequest(f"{kind} annotations with different values overlap in a comment block.")
    return out


def _overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    spans_a = zip(a["starts"], a["ends"], strict=False)  # the client skips a start without its end, as zip does
    return any(s1 < e2 and s2 < e1 for s1, e1 in spans_a for s2, e2 in zip(b["starts"], b["ends"], strict=False))
