"""The markdown parser's working tree and the `<!-- id:… -->` comments that carry block identity through markdown.

The client's parser builds a mutable tree and keeps going back to it: a list found later turns the paragraph above
it into its parent by setting `childrenType`, and a heading's list children get wrapped in a container when prose
follows. So the port parses into these mutable nodes, with `childrenType` and `language` kept beside the other
attributes exactly as the JS `SeedBlock` keeps them (the parser tests them separately from attributes that merely
arrived in a comment), and freezes the result into `blocks.BlockNode` at the end, merging them the way
`markdownBlockNodesToHMBlockNodes` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_harness.hypermedia.blocks import Annotation, Block, BlockNode
from mcp_harness.hypermedia.markdown.jsutil import DOT, WS, json_parse

NewId = Callable[[], str]

COMMENT_BODY = f"<!--{WS}*id:([A-Za-z0-9_-]+)(?:{WS}+type:([A-Za-z0-9_-]+))?(?:{WS}+attrs:(\\{{{DOT}*\\}}))?{WS}*-->"
TRAILING_COMMENT_RE = re.compile(f" ?{COMMENT_BODY}{WS}*\\Z")
STANDALONE_COMMENT_RE = re.compile(f"{WS}*{COMMENT_BODY}{WS}*\\Z")
END_RE = re.compile(f"{WS}*<!--{WS}*end:([A-Za-z0-9_-]+){WS}*-->{WS}*\\Z")


@dataclass(frozen=True, slots=True)
class BlockComment:
    """What a `<!-- id:X [type:T] [attrs:{…}] -->` comment says about its block."""

    id: str
    type: str | None = None
    attrs: dict[str, Any] | None = None


@dataclass(slots=True)
class MdBlock:
    """The JS `SeedBlock`: `childrenType` and `language` live beside, not inside, `attributes`."""

    type: str
    id: str
    text: str = ""
    annotations: tuple[Annotation, ...] = ()
    children_type: str | None = None
    language: str | None = None
    link: str | None = None
    attributes: dict[str, Any] | None = None


@dataclass(slots=True)
class MdNode:
    block: MdBlock
    children: list[MdNode] = field(default_factory=list["MdNode"])


def comment_from_match(m: re.Match[str]) -> BlockComment:
    attrs: dict[str, Any] | None = None
    if m[3]:
        try:
            parsed = json_parse(m[3])
        except ValueError:
            parsed = None
        # Malformed attrs are dropped silently, as the client does: the id still counts.
        if isinstance(parsed, dict):
            attrs = parsed
    return BlockComment(m[1], m[2] or None, attrs)


def strip_block_comment(s: str) -> tuple[str, BlockComment | None]:
    """The line without its trailing block comment, and the comment."""
    m = TRAILING_COMMENT_RE.search(s)
    if m:
        return s[: m.start()], comment_from_match(m)
    return s, None


def base_block(
    type_: str, comment: BlockComment | None, new_id: NewId, text: str = "", annotations: tuple[Annotation, ...] = ()
) -> MdBlock:
    block = MdBlock(type_, (comment.id if comment else "") or new_id(), text, annotations)
    if comment and comment.attrs:
        block.attributes = dict(comment.attrs)
    return block


def freeze(nodes: list[MdNode]) -> tuple[BlockNode, ...]:
    """The parse as frozen `BlockNode`s, attributes merged as `markdownBlockNodesToHMBlockNodes` merges them."""
    out: list[BlockNode] = []
    for node in nodes:
        b = node.block
        attributes = dict(b.attributes or {})
        if b.children_type is not None:
            attributes["childrenType"] = b.children_type
        if b.language is not None:
            attributes["language"] = b.language
        block = Block(id=b.id, type=b.type, text=b.text, link=b.link, annotations=b.annotations, attributes=attributes)
        out.append(BlockNode(block, freeze(node.children)))
    return tuple(out)
