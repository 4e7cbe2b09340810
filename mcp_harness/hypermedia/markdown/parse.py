"""Markdown → a Seed block tree, ported from the Seed client's `parseMarkdown` (`@seed-hypermedia/client`).

This is Seed's own dialect, not CommonMark: a document written through us must come out block for block the way the
official client would write it, or other Seed tools would see different ids, nesting and attributes for the same
text. The port follows the client's line-based algorithm statement by statement — a stack of frames keyed by
indentation, headings that nest everything below them by level, lists that attach to the paragraph above, and
`<!-- id:… -->` / `<!-- end:… -->` comments that pin identity and structure — and draws fresh ids in the same order,
so a deterministic `new_id` reproduces the client's tree exactly (the tests rely on that).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcp_harness.hypermedia.markdown.inline import parse_inline, read_link
from mcp_harness.hypermedia.markdown.jsutil import DOT, WS, WS_CLASS_BODY, trim
from mcp_harness.hypermedia.markdown.nodes import (
    END_RE,
    STANDALONE_COMMENT_RE,
    BlockComment,
    MdBlock,
    MdNode,
    NewId,
    base_block,
    comment_from_match,
    strip_block_comment,
)
from mcp_harness.hypermedia.markdown.tables import table_node

_MARKER_RE = re.compile(r"([-*+] |[0-9]+[.)] |> )")
HEADING_RE = re.compile(f"(#{{1,6}}){WS}+({DOT}*)\\Z")
FENCE_RE = re.compile(f"(`{{3,}})({DOT}*)\\Z")
_FENCE_CLOSE_RE = re.compile(f"(`{{3,}}){WS}*\\Z")
_LINK_ONLY_RE = re.compile(f"<([a-zA-Z][a-zA-Z0-9+.-]*:[^<>{WS_CLASS_BODY}]*)>\\Z")
_SCHEME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")
_LIST_TYPES = frozenset({"Unordered", "Ordered", "Blockquote"})


@dataclass(frozen=True, slots=True)
class _Line:
    raw: str
    indent: int
    marker: str
    marker_kind: str | None
    content_col: int
    rest: str
    blank: bool


@dataclass(slots=True)
class _Frame:
    """Where the next block goes: a parent (None for the document) and the indentation its children sit at.
    `shorthand` marks a list opened without a parent line, `heading_level` a heading's section."""

    node: MdNode | None
    list: list[MdNode]
    child_indent: int
    shorthand: str | None = None
    heading_level: int | None = None
    marker_run: str | None = None


@dataclass(frozen=True, slots=True)
class _Parsed:
    node: MdNode
    next: int
    standalone: bool = False


def _analyze(raw: str) -> _Line:
    lead_len = len(raw) - len(raw.lstrip(" \t"))
    lead = raw[:lead_len]
    indent = len(lead.replace("\t", "  "))
    rest = raw[lead_len:]
    blank = trim(rest) == ""
    marker = ""
    kind: str | None = None
    m = _MARKER_RE.match(rest)
    if m and not blank:
        marker = m[1]
        kind = "Blockquote" if marker == "> " else "Ordered" if marker[0] in "0123456789" else "Unordered"
        rest = rest[len(marker) :]
    return _Line(raw, indent, marker, kind, indent + len(marker), rest, blank)


def _starts_special_block(rest: str) -> bool:
    return bool(
        HEADING_RE.match(rest)
        or FENCE_RE.match(rest)
        or rest.startswith("$$")
        or rest.startswith("![")
        or rest.startswith("|")
        or STANDALONE_COMMENT_RE.match(rest)
        or END_RE.match(rest)
    )


def _strip_indent(line: str, n: int) -> str:
    k = 0
    while k < n and k < len(line) and line[k] == " ":
        k += 1
    return line[k:]


def _typed_node(visible: str, comment: BlockComment, new_id: NewId) -> MdNode:
    """A block whose comment names its type (Embed, Button, Video, …): a bare `<url>`, a `[label](url)`, or text."""
    assert comment.type
    block = base_block(comment.type, comment, new_id)
    v = trim(visible)
    link_only = _LINK_ONLY_RE.match(v)
    labeled = read_link(v, 0) if v.startswith("[") else None
    if link_only:
        block.link = link_only[1]
    elif labeled and labeled.end == len(v):
        block.text, block.annotations = parse_inline(labeled.label)
        block.link = labeled.url
    elif v:
        block.text, block.annotations = parse_inline(v)
    return MdNode(block)


def _inline_node(type_: str, raw: str, comment: BlockComment | None, new_id: NewId) -> MdNode:
    text, annotations = parse_inline(raw)
    return MdNode(base_block(type_, comment, new_id, text, annotations))


def _finalize(nodes: list[MdNode]) -> None:
    for n in nodes:
        if n.children and not n.block.children_type and n.block.type not in ("Table", "TableRow"):
            n.block.children_type = "Group"
        _finalize(n.children)


@dataclass(slots=True)
class _Parser:
    infos: list[_Line]
    new_id: NewId
    root: _Frame = field(init=False)
    stack: list[_Frame] = field(init=False)

    def __post_init__(self) -> None:
        self.root = _Frame(None, [], 0)
        self.stack = [self.root]

    def run(self) -> list[MdNode]:
        infos, stack = self.infos, self.stack
        i = 0
        while i < len(infos):
            info = infos[i]
            if info.blank:
                i += 1
                continue
            end_match = END_RE.match(info.rest)
            if end_match and not info.marker:
                idx = next(
                    (k for k in range(len(stack) - 1, -1, -1) if (f := stack[k].node) and f.block.id == end_match[1]),
                    -1,
                )
                if idx > 0:
                    del stack[idx:]
                i += 1
                continue
            heading = HEADING_RE.match(info.rest)
            heading_level = len(heading[1]) if heading else None
            self._adjust(info, heading_level)
            frame = stack[-1]
            if (
                not info.marker_kind
                and not frame.shorthand
                and frame.node
                and frame.node.block.type == "Heading"
                and frame.list
                and frame.node.block.children_type in _LIST_TYPES
            ):
                # Prose after a heading's list: the list moves into a container so the heading stays a Group.
                container = MdNode(
                    MdBlock("Paragraph", self.new_id(), children_type=frame.node.block.children_type), frame.list[:]
                )
                frame.list.clear()
                frame.list.append(container)
                frame.node.block.children_type = "Group"
                frame.marker_run = None
            if info.marker_kind and not frame.shorthand and self._implicit_list_start(frame, info.marker_kind):
                prev = frame.list[-1] if frame.list else None
                can_nest = (
                    prev is not None
                    and prev.block.type == "Paragraph"
                    and prev.block.text != ""
                    and not prev.children
                    and not prev.block.children_type
                )
                if can_nest:
                    assert prev is not None
                    target = prev
                else:
                    target = MdNode(MdBlock("Paragraph", self.new_id()))
                    frame.list.append(target)
                    frame.marker_run = None
                target.block.children_type = info.marker_kind
                if len(stack) > 1 and stack[-1].node is target:
                    stack.pop()
                stack.append(_Frame(target, target.children, info.indent, shorthand=info.marker_kind))
                frame = stack[-1]
            parsed = self._block_at(i)
            i = parsed.next
            node = parsed.node
            frame.list.append(node)
            frame.marker_run = info.marker_kind
            if info.marker_kind and frame.node and not frame.node.block.children_type:
                frame.node.block.children_type = info.marker_kind
            if heading_level is not None:
                stack.append(_Frame(node, node.children, info.content_col, heading_level=heading_level))
            elif parsed.standalone and not info.marker:
                following = self._next_non_blank(i)
                if following and following.indent == info.indent and following.marker_kind:
                    stack.append(_Frame(node, node.children, info.indent, shorthand=following.marker_kind))
                else:
                    stack.append(_Frame(node, node.children, info.indent + 2))
            else:
                child_indent = info.content_col if info.marker else info.indent + 2
                stack.append(_Frame(node, node.children, child_indent))
        _finalize(self.root.list)
        return self.root.list

    def _adjust(self, info: _Line, heading_level: int | None) -> None:
        stack = self.stack
        while len(stack) > 1:
            frame = stack[-1]
            if info.indent < frame.child_indent:
                stack.pop()
                continue
            if info.indent == frame.child_indent:
                if frame.shorthand:
                    if info.marker_kind == frame.shorthand:
                        break
                    stack.pop()
                    continue
                level = frame.heading_level
                if level is not None and heading_level is not None and heading_level <= level:
                    stack.pop()
                    continue
            break

    @staticmethod
    def _implicit_list_start(frame: _Frame, kind: str) -> bool:
        if not frame.node:
            return True
        parent_type = frame.node.block.children_type
        if parent_type and parent_type != kind:
            return True
        return bool(frame.list) and frame.marker_run != kind

    def _next_non_blank(self, start: int) -> _Line | None:
        return next((line for line in self.infos[start:] if not line.blank), None)

    def _table_lines(self, start: int) -> tuple[list[str], int]:
        lines: list[str] = []
        j = start
        while j < len(self.infos) and self.infos[j].rest.startswith("|") and not self.infos[j].blank:
            lines.append(self.infos[j].rest)
            j += 1
        return lines, j

    def _block_at(self, start: int) -> _Parsed:
        infos, new_id = self.infos, self.new_id
        info = infos[start]
        rest = info.rest
        if standalone := STANDALONE_COMMENT_RE.match(rest):
            comment = comment_from_match(standalone)
            following = self._next_non_blank(start + 1)
            if (
                following
                and following.indent >= info.indent
                and following.rest.startswith("|")
                and not following.marker
            ):
                lines, j = self._table_lines(start + 1)
                return _Parsed(table_node(lines, comment, new_id), j)
            return _Parsed(MdNode(base_block(comment.type or "Paragraph", comment, new_id)), start + 1, True)
        if fence := FENCE_RE.match(rest):
            fence_len = len(fence[1])
            language, comment = strip_block_comment(trim(fence[2]))
            body: list[str] = []
            j = start + 1
            while j < len(infos):
                line = infos[j]
                closing = _FENCE_CLOSE_RE.match(trim(line.raw))
                if closing and len(closing[1]) >= fence_len and line.indent <= info.content_col:
                    break
                body.append(_strip_indent(line.raw, info.content_col))
                j += 1
            block = base_block("Code", comment, new_id, "\n".join(body))
            if language := trim(language):
                block.language = language
            return _Parsed(MdNode(block), j + 1)
        if rest.startswith("$$"):
            _, comment = strip_block_comment(trim(rest[2:]))
            body = []
            j = start + 1
            while j < len(infos) and trim(infos[j].raw) != "$$":
                body.append(_strip_indent(infos[j].raw, info.content_col))
                j += 1
            return _Parsed(MdNode(base_block("Math", comment, new_id, "\n".join(body))), j + 1)
        if heading := HEADING_RE.match(rest):
            text, comment = strip_block_comment(heading[2])
            if comment and comment.type:
                return _Parsed(_typed_node(text, comment, new_id), start + 1)
            return _Parsed(_inline_node("Heading", text, comment, new_id), start + 1)
        if rest.startswith("|"):
            lines, j = self._table_lines(start)
            return _Parsed(table_node(lines, None, new_id), j)
        visible, comment = strip_block_comment(rest)
        if comment and comment.type:
            return _Parsed(_typed_node(visible, comment, new_id), start + 1)
        if visible.startswith("!["):
            link = read_link(visible, 1)
            if link and trim(visible[link.end :]) == "":
                url = link.url
                # A relative path is a local file; the writer uploads `file://` links to IPFS before publishing.
                if url and not _SCHEME_RE.match(url):
                    url = f"file://{url}"
                alt, annotations = parse_inline(link.label)
                block = base_block("Image", comment, new_id, alt, annotations)
                block.link = url
                return _Parsed(MdNode(block), start + 1)
        text = visible
        j = start + 1
        if not comment:
            while j < len(infos):
                line = infos[j]
                if line.blank or line.marker or line.indent != info.content_col or _starts_special_block(line.rest):
                    break
                more, c = strip_block_comment(line.rest)
                if c:
                    break
                text += " " + more
                j += 1
        return _Parsed(_inline_node("Paragraph", text, comment, new_id), j)


def parse_blocks(content: str, new_id: NewId) -> list[MdNode]:
    """The block tree of markdown content that has had its frontmatter removed."""
    return _Parser([_analyze(line) for line in content.split("\n")], new_id).run()
