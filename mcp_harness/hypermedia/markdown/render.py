"""A Seed block tree → markdown, ported from the Seed client's `blocksToMarkdown` (the non-resolving variant).

This is the lossless half of the markdown pair: every block gets a trailing `<!-- id:X [type:T] [attrs:{…}] -->`
comment, so a model can edit the markdown and hand it back, and `parse_markdown` recovers the same blocks with the
same ids (only the blocks it changed get new content). Block types markdown has no syntax for (Embed, Button, Video,
Query, …) survive through `type:` and `attrs:` in that comment; headings close with `<!-- end:X -->` when a
non-heading sibling follows, so nesting survives too. Matching the client line for line means a document read
through us and a document exported by Seed look the same to whoever edits them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.hypermedia.blocks import Annotation, BlockNode
from mcp_harness.hypermedia.markdown.frontmatter import emit_frontmatter
from mcp_harness.hypermedia.markdown.inline_render import render_inline, render_url
from mcp_harness.hypermedia.markdown.jsutil import comment_json

NATIVE_TYPES = frozenset({"Paragraph", "Heading", "Code", "Math", "Image", "Table"})
LIST_TYPES = frozenset({"Unordered", "Ordered", "Blockquote"})


@dataclass(frozen=True, slots=True)
class _Options:
    ids: bool
    ipfs_gateway: bool


def render_blocks(
    tree: Sequence[BlockNode],
    metadata: Mapping[str, Any] | None,
    *,
    block_ids: bool = True,
    frontmatter: bool = True,
    ipfs_gateway: bool = False,
) -> str:
    """Markdown for a document (`blocksToMarkdown`). See `markdown.render_markdown` for the options."""
    out: list[str] = [emit_frontmatter(metadata or {}).removesuffix("\n")] if frontmatter else []
    _render_nodes(tree, "", None, 0, _Options(block_ids, ipfs_gateway), out)
    return "\n".join(out) + "\n" if out else ""


def _block_comment(
    opts: _Options, block_id: str, type_: str | None = None, attrs: Mapping[str, Any] | None = None
) -> str:
    if not opts.ids:
        return ""
    s = f"<!-- id:{block_id}"
    if type_:
        s += f" type:{type_}"
    if attrs:
        s += f" attrs:{comment_json(attrs)}"
    return s + " -->"


def _with_comment(visible: str, comment: str) -> str:
    return f"{visible} {comment}" if visible and comment else visible or comment


def _push(out: list[str], opts: _Options, line: str) -> None:
    # Without ids a comment-only line would be a stray blank line; drop it.
    if opts.ids or line.strip(" "):
        out.append(line if opts.ids else line.rstrip(" "))


def _is_native_attribute(type_: str, key: str, value: Any, has_children: bool) -> bool:
    if key == "childrenType":
        if value in LIST_TYPES:
            return True
        return value == "Group" and has_children
    return type_ == "Code" and key == "language"


def _extra_attributes(type_: str, attributes: Mapping[str, Any], has_children: bool) -> dict[str, Any]:
    """Attributes markdown syntax cannot express, which therefore travel in the block's comment."""
    return {
        k: v for k, v in attributes.items() if v is not None and not _is_native_attribute(type_, k, v, has_children)
    }


def _marker(children_type: str | None, index: int) -> str:
    if children_type == "Unordered":
        return "- "
    if children_type == "Ordered":
        return f"{index + 1}. "
    if children_type == "Blockquote":
        return "> "
    return ""


def _media_url(url: str, opts: _Options) -> str:
    return f"https://ipfs.io/ipfs/{url[7:]}" if opts.ipfs_gateway and url.startswith("ipfs://") else url


def _render_nodes(
    nodes: Sequence[BlockNode], ind: str, children_type: str | None, heading_depth: int, opts: _Options, out: list[str]
) -> None:
    listy = children_type in LIST_TYPES
    for i, node in enumerate(nodes):
        if i > 0 and not listy:
            out.append("")
        wrote_heading = _render_node(node, ind, _marker(children_type, i), heading_depth, opts, out)
        following = nodes[i + 1] if i + 1 < len(nodes) else None
        if wrote_heading and following and following.block.type != "Heading" and opts.ids:
            # Without this the parser would nest the following siblings under the heading.
            out.append(f"{ind}<!-- end:{node.block.id} -->")


def _render_node(node: BlockNode, ind: str, marker: str, heading_depth: int, opts: _Options, out: list[str]) -> bool:
    block = node.block
    children = node.children
    type_ = block.type
    text = block.text or ""
    link = block.link or ""
    attributes = block.attributes or {}
    raw_children_type = attributes.get("childrenType")
    children_type = raw_children_type if isinstance(raw_children_type, str) else None
    content_ind = ind + " " * len(marker)
    if type_ == "Table":
        table = _table(node, content_ind, opts)
        extra = _extra_attributes(type_, attributes, False)
        _push(out, opts, ind + marker + _block_comment(opts, block.id, None if table else "Table", extra))
        if table:
            out.extend(table.split("\n"))
        return False
    extra = _extra_attributes(type_, attributes, bool(children))
    comment = _block_comment(opts, block.id, None if type_ in NATIVE_TYPES else type_, extra)
    wrote_heading = False
    child_ind = content_ind if marker else ind + "  "
    child_heading_depth = 0
    shorthand = False
    listy_children = children_type in LIST_TYPES
    match type_:
        case "Paragraph":
            if not text and children and listy_children and not marker:
                # An empty container of a list: the comment line alone, the list at the same indentation.
                _push(out, opts, ind + comment)
                shorthand = True
                child_ind = ind
            elif not text:
                _push(out, opts, ind + marker + comment)
            else:
                out.append(ind + marker + _with_comment(_inline(text, block.annotations, True), comment))
        case "Heading":
            level = min(heading_depth + 1, 6)
            heading = "#" * level + " " + _inline(text, block.annotations, False)
            out.append(ind + marker + _with_comment(heading, comment))
            if level < 6:
                wrote_heading = not marker
                child_ind = content_ind
                child_heading_depth = heading_depth + 1
            else:
                child_ind = content_ind + "  "
            if children:
                out.append("")
        case "Code":
            raw_language = attributes.get("language")
            language = raw_language if isinstance(raw_language, str) else ""
            fence_len = 3
            for m in re.finditer("`+", text):
                fence_len = max(fence_len, len(m[0]) + 1)
            fence = "`" * fence_len
            out.append(ind + marker + _with_comment(fence + language, comment))
            out.extend(content_ind + line if line else "" for line in text.split("\n"))
            out.append(content_ind + fence)
        case "Math":
            out.append(ind + marker + _with_comment("$$", comment))
            out.extend(content_ind + line if line else "" for line in text.split("\n"))
            out.append(content_ind + "$$")
        case "Image":
            alt = _inline(text, block.annotations, False)
            url = render_url(_media_url(link, opts))
            out.append(ind + marker + _with_comment(f"![{alt}]({url})", comment))
        case _:
            url = render_url(_media_url(link, opts))
            visible = ""
            if text and link:
                visible = f"[{_inline(text, block.annotations, False)}]({url})"
            elif link:
                visible = f"<{_media_url(link, opts)}>"
            elif text:
                visible = _inline(text, block.annotations, True)
            _push(out, opts, ind + marker + _with_comment(visible, comment))
            if not visible and children and listy_children and not marker:
                shorthand = True
                child_ind = ind
    if children:
        if not shorthand and type_ != "Heading" and not listy_children:
            out.append("")
        _render_nodes(children, child_ind, children_type, child_heading_depth, opts, out)
    return wrote_heading


def _inline(text: str, annotations: Sequence[Annotation], at_line_start: bool) -> str:
    return render_inline(text, annotations, at_line_start=at_line_start)


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    is_header: bool
    cells: dict[str, tuple[str, tuple[Annotation, ...]]]


def _table(node: BlockNode, ind: str, opts: _Options) -> str:
    """The pipe table for a Table node, or "" when it has no columns (it is then written as a typed comment)."""
    columns: list[tuple[str, dict[str, Any]]] = []
    rows: list[_Row] = []
    for child in node.children:
        block = child.block
        if block.type == "TableColumn":
            columns.append((block.id, _extra_attributes("TableColumn", block.attributes or {}, False)))
        elif block.type == "TableRow":
            cells: dict[str, tuple[str, tuple[Annotation, ...]]] = {}
            for cell_node in child.children:
                cell = cell_node.block
                column_id = (cell.attributes or {}).get("columnId")
                if isinstance(column_id, str) and column_id and column_id not in cells:
                    cells[column_id] = (cell.text or "", cell.annotations)
            # Only the first row may be the header row.
            is_header = not rows and (block.attributes or {}).get("isHeader") is True
            rows.append(_Row(block.id, is_header, cells))
    if not columns:
        return ""

    def cell_texts(row: _Row | None) -> list[str]:
        texts: list[str] = []
        for column_id, _ in columns:
            cell = row.cells.get(column_id) if row else None
            rendered = render_inline(cell[0], cell[1], at_line_start=False) if cell else ""
            texts.append(rendered.replace("|", "\\|").replace("\n", "<br>"))
        return texts

    header = rows[0] if rows and rows[0].is_header else None
    header_cells: list[str] = []
    for (column_id, attrs), text in zip(columns, cell_texts(header), strict=True):
        if not opts.ids:
            header_cells.append(text)
            continue
        attr_text = f" attrs:{comment_json(attrs)}" if attrs else ""
        header_cells.append((text + " " if text else "") + f"<!-- col:{column_id}{attr_text} -->")
    if header and opts.ids:
        header_cells[-1] += " " + _block_comment(opts, header.id)
    lines = [ind + "| " + " | ".join(header_cells) + " |", ind + "|" + "|".join(" --- " for _ in columns) + "|"]
    for row in rows[1:] if header else rows:
        texts = cell_texts(row)
        if opts.ids:
            texts[-1] = (texts[-1] + " " if texts[-1] else "") + _block_comment(opts, row.id)
        lines.append(ind + "| " + " | ".join(texts) + " |")
    return "\n".join(lines)
