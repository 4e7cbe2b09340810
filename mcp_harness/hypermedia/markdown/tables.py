"""Pipe tables → Seed `Table` blocks with column and row identity (`createTableNode` in the Seed client).

A Seed table is a `Table` whose children are `TableColumn` blocks followed by `TableRow` blocks, each row holding one
`Paragraph` cell per column that names its column in a `columnId` attribute. Markdown can carry only part of that
identity: the table's id in a standalone comment before it, column ids as `<!-- col:ID -->` in the header cells,
and row ids as `<!-- id:ID -->` in a row's last cell. Cell ids never appear; the update diff re-derives them from
(row, column) (`diff.rebind_table_identities`), which is why a cell edit does not replace the whole table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mcp_harness.hypermedia.markdown.inline import parse_inline
from mcp_harness.hypermedia.markdown.jsutil import WS, json_parse, trim
from mcp_harness.hypermedia.markdown.nodes import BlockComment, MdBlock, MdNode, NewId, base_block, strip_block_comment

COL_ID_RE = re.compile(f"<!--{WS}*col:([A-Za-z0-9_-]+)(?:{WS}+attrs:(\\{{.*?\\}}))?{WS}*-->")
CELL_ID_RE = re.compile(f"<!--{WS}*id:([A-Za-z0-9_-]+){WS}*-->")
_SEPARATOR_CELL = re.compile(r":?-+:?\Z")


@dataclass(slots=True)
class _Cell:
    text: str
    col_id: str | None = None
    col_attrs: Any = None


@dataclass(slots=True)
class _Row:
    cells: list[_Cell]
    id: str | None


def _split_row(line: str) -> _Row:
    text, comment = strip_block_comment(trim(line))
    row_id = comment.id if comment else None
    s = trim(text)
    if s.startswith("|"):
        s = s[1:]
    raw_cells: list[str] = []
    cur = ""
    i = 0
    while i < len(s):
        if s[i] == "\\" and s[i + 1 : i + 2] == "|":
            cur += "|"
            i += 1
        elif s[i] == "|":
            raw_cells.append(trim(cur))
            cur = ""
        else:
            cur += s[i]
        i += 1
    last = trim(cur)
    if last != "" or not raw_cells:
        raw_cells.append(last)
    cells: list[_Cell] = []
    for raw in raw_cells:
        cell_text = raw
        if m := CELL_ID_RE.search(cell_text):
            row_id = m[1]
            cell_text = cell_text.replace(m[0], "", 1)
        col_id = None
        col_attrs: Any = None
        if m := COL_ID_RE.search(cell_text):
            col_id = m[1]
            if m[2]:
                try:
                    col_attrs = json_parse(m[2])
                except ValueError:
                    col_attrs = None
            cell_text = cell_text.replace(m[0], "", 1)
        cells.append(_Cell(trim(cell_text), col_id, col_attrs))
    return _Row(cells, row_id)


def _is_separator(cells: list[_Cell]) -> bool:
    return bool(cells) and all(_SEPARATOR_CELL.match(c.text) for c in cells)


def _cell(raw_text: str, column_id: str, new_id: NewId) -> MdNode:
    text, annotations = parse_inline(raw_text)
    return MdNode(MdBlock("Paragraph", new_id(), text, annotations, attributes={"columnId": column_id}))


def table_node(lines: list[str], comment: BlockComment | None, new_id: NewId) -> MdNode:
    """One `Table` node from consecutive `|` lines. Ids are drawn in the client's order (columns, each row's cells
    then the row, the table last) so a deterministic `new_id` yields the same tree as the client."""
    raw_rows = [_split_row(line) for line in lines]
    header: _Row | None = None
    if len(raw_rows) >= 2 and _is_separator(raw_rows[1].cells):
        header = raw_rows[0]
        body = [r for r in raw_rows[2:] if not _is_separator(r.cells)]
    else:
        body = [r for r in raw_rows if not _is_separator(r.cells)]
    header_cells = header.cells if header else []
    col_count = max([len(header_cells), *(len(r.cells) for r in body), 0])
    column_ids = [
        (header_cells[idx].col_id if idx < len(header_cells) else None) or new_id() for idx in range(col_count)
    ]
    columns: list[MdNode] = []
    for idx, column_id in enumerate(column_ids):
        block = MdBlock("TableColumn", column_id)
        attrs = header_cells[idx].col_attrs if idx < len(header_cells) else None
        # The JS spreads whatever JSON the col comment held; only a non-empty object becomes attributes.
        if isinstance(attrs, dict) and attrs:
            block.attributes = dict(attrs)  # pyright: ignore[reportUnknownArgumentType]
        columns.append(MdNode(block))
    rows: list[MdNode] = []
    if header and any(c.text != "" for c in header_cells):
        cells = [
            _cell(header_cells[idx].text if idx < len(header_cells) else "", cid, new_id)
            for idx, cid in enumerate(column_ids)
        ]
        rows.append(MdNode(MdBlock("TableRow", header.id or new_id(), attributes={"isHeader": True}), cells))
    for row in body:
        cells = [
            _cell(row.cells[idx].text if idx < len(row.cells) else "", cid, new_id)
            for idx, cid in enumerate(column_ids)
        ]
        rows.append(MdNode(MdBlock("TableRow", row.id or new_id()), cells))
    return MdNode(base_block("Table", comment, new_id), [*columns, *rows])
