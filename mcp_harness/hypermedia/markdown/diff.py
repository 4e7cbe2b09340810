"""Block trees → document operations: whole-document writes, minimal updates, and id matching.

Ported from the Seed client (`flattenToOperations` in markdown-to-blocks, `block-diff.ts`, and the CLI's metadata
diff), because the operations are what other Seed peers replay: an update that re-sent every block would bury the
document's history in no-op `ReplaceBlock`s and lose per-block authorship, while one that dropped an id would turn
an edit into a delete plus an insert. The update pipeline is the client's `document update`:

    ops = diff_operations(old_tree, new_tree)      # rebinds table cells, then diffs by id

with `match_block_ids` first when the new markdown carried no `<!-- id:… -->` markers at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mcp_harness.hypermedia.blocks import Annotation, Block, BlockNode, block_to_op, walk
from mcp_harness.hypermedia.markdown.jsutil import json_stringify, locale_compare_key, truthy

_NATIVE_ATTRS = ("childrenType", "language")


def document_operations(tree: Sequence[BlockNode]) -> list[dict[str, Any]]:
    """Ops that write `tree` into an empty document (`flattenToOperations`): for each level, a `ReplaceBlock` per
    block (each followed by its subtree's ops), then one `MoveBlocks` placing the level's blocks in order, no `ref`."""
    return _flatten(tree, "")


def _flatten(tree: Sequence[BlockNode], parent: str) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    ids: list[str] = []
    for node in tree:
        ops.append({"type": "ReplaceBlock", "block": block_to_op(node.block)})
        ids.append(node.block.id)
        if node.children:
            ops.extend(_flatten(node.children, node.block.id))
    if ids:
        ops.append({"type": "MoveBlocks", "blocks": ids, "parent": parent})
    return ops


def match_block_ids(old: Sequence[BlockNode], new: Sequence[BlockNode]) -> tuple[BlockNode, ...]:
    """`new` with ids taken from `old` by position (`matchBlockIds`, what the Seed CLI does for hand-written files).

    Walking both trees level by level, the new block at position N takes the id of the old block at position N when
    the two have the same type, whatever their text; otherwise it keeps its own (fresh) id. Children are matched
    the same way under each pair of positions. Table contents are left alone: `diff_operations` rebinds them by
    column and row. So an edited paragraph updates in place, and a block inserted in the middle shifts the match
    (later blocks are then updated rather than recreated — still correct, just more `ReplaceBlock`s).

    One addition to the client's rule, so that calling this on markdown that does carry `<!-- id:… -->` markers is
    safe: a new block whose id already exists in `old` keeps it (the writer named that block), and an old id that
    the new tree uses anywhere is never handed to another block by position. For markdown without markers — the only
    case in which the client calls `matchBlockIds` (see `markdown.carries_block_ids`) — fresh ids never exist in
    `old`, and the result is exactly the client's.
    """
    old_ids = {node.block.id for _, node in walk(old)}
    claimed = {node.block.id for _, node in walk(new) if node.block.id in old_ids}

    def match(old_level: Sequence[BlockNode], new_level: Sequence[BlockNode]) -> tuple[BlockNode, ...]:
        out: list[BlockNode] = []
        for idx, node in enumerate(new_level):
            old_node = old_level[idx] if idx < len(old_level) else None
            matched = node.block.id
            if (
                matched not in old_ids
                and old_node
                and old_node.block.type == node.block.type
                and old_node.block.id not in claimed
            ):
                matched = old_node.block.id
            if node.block.type == "Table":
                children = node.children
            else:
                children = match(old_node.children if old_node else (), node.children)
            out.append(BlockNode(replace(node.block, id=matched), children))
        return tuple(out)

    return match(old, new)


def _extra(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if k not in _NATIVE_ATTRS}


def _header_cell_text(row: BlockNode | None, column_id: str) -> str | None:
    if not row:
        return None
    for cell in row.children:
        if cell.block.attributes.get("columnId") == column_id:
            return cell.block.text or ""
    return None


def rebind_table_identities(old: Sequence[BlockNode], new: Sequence[BlockNode]) -> tuple[BlockNode, ...]:
    """Tables in `new` with column, row and cell identity recovered from the same tables in `old`
    (`rebindTableIdentities`).

    Markdown carries table, column and row ids but never cell ids. For a table whose id exists in `old`: columns
    match by id, then by unique non-empty header text, then by position; rows by id, then by position; each cell
    takes the id of the old cell at (matched row, matched column); attributes markdown cannot express (column width,
    …) carry over from the matched old block. Only the first column and first row may keep `isHeader`.
    """
    old_tables: dict[str, BlockNode] = {}

    def index(nodes: Sequence[BlockNode]) -> None:
        for node in nodes:
            if node.block.type == "Table":
                old_tables[node.block.id] = node
            index(node.children)

    def walk(nodes: Sequence[BlockNode]) -> tuple[BlockNode, ...]:
        return tuple(
            _rebind_table(old_tables.get(n.block.id), n)
            if n.block.type == "Table"
            else replace(n, children=walk(n.children))
            for n in nodes
        )

    index(old)
    return walk(new)


def _match_rest(new_items: list[BlockNode], old_items: list[BlockNode], matched: list[BlockNode | None]) -> None:
    used = {m.block.id for m in matched if m}
    remaining = iter([o for o in old_items if o.block.id not in used])
    for idx in range(len(new_items)):
        if matched[idx] is None:
            matched[idx] = next(remaining, None)


def _match_by_id(new_items: list[BlockNode], old_items: list[BlockNode]) -> list[BlockNode | None]:
    by_id = {o.block.id: o for o in old_items}
    used: set[str] = set()
    matched: list[BlockNode | None] = []
    for item in new_items:
        found = by_id.get(item.block.id)
        if found and found.block.id not in used:
            used.add(found.block.id)
            matched.append(found)
        else:
            matched.append(None)
    return matched


def _rebind_table(old_table: BlockNode | None, new_table: BlockNode) -> BlockNode:
    new_cols = [c for c in new_table.children if c.block.type == "TableColumn"]
    new_rows = [c for c in new_table.children if c.block.type == "TableRow"]
    others = [c for c in new_table.children if c.block.type not in ("TableColumn", "TableRow")]
    old_children = old_table.children if old_table else ()
    old_cols = [c for c in old_children if c.block.type == "TableColumn"]
    old_rows = [c for c in old_children if c.block.type == "TableRow"]

    matched_cols = _match_by_id(new_cols, old_cols)
    old_header = next((r for r in old_rows if r.block.attributes.get("isHeader") is True), None)
    new_header = next((r for r in new_rows if r.block.attributes.get("isHeader") is True), None)
    if old_header and new_header:
        used = {m.block.id for m in matched_cols if m}
        by_text: dict[str, BlockNode | None] = {}
        for old_col in old_cols:
            if old_col.block.id in used:
                continue
            text = _header_cell_text(old_header, old_col.block.id)
            if text:
                # A header text shared by two old columns identifies neither.
                by_text[text] = None if text in by_text else old_col
        for idx, col in enumerate(new_cols):
            if matched_cols[idx]:
                continue
            text = _header_cell_text(new_header, col.block.id) or ""
            candidate = by_text.get(text) if text else None
            if candidate and candidate.block.id not in used:
                matched_cols[idx] = candidate
                used.add(candidate.block.id)
    _match_rest(new_cols, old_cols, matched_cols)

    col_ids: dict[str, str] = {}
    final_cols: list[BlockNode] = []
    for col, old_col in zip(new_cols, matched_cols, strict=True):
        final_id = old_col.block.id if old_col else col.block.id
        col_ids[col.block.id] = final_id
        attributes = {**_extra(old_col.block.attributes if old_col else None), **col.block.attributes}
        final_cols.append(BlockNode(replace(col.block, id=final_id, attributes=attributes)))

    matched_rows = _match_by_id(new_rows, old_rows)
    _match_rest(new_rows, old_rows, matched_rows)
    final_rows: list[BlockNode] = []
    for row, old_row in zip(new_rows, matched_rows, strict=True):
        old_extra = _extra(old_row.block.attributes if old_row else None)
        old_extra.pop("isHeader", None)  # the dialect does say which row is the header
        cells: list[BlockNode] = []
        for cell in row.children:
            column_id = cell.block.attributes.get("columnId")
            final_column = col_ids.get(column_id, column_id) if isinstance(column_id, str) else column_id
            old_cell = next(
                (
                    c
                    for c in (old_row.children if old_row else ())
                    if c.block.attributes.get("columnId") == final_column
                ),
                None,
            )
            attributes = {
                **_extra(old_cell.block.attributes if old_cell else None),
                **cell.block.attributes,
                "columnId": final_column,
            }
            cell_id = old_cell.block.id if old_cell else cell.block.id
            cells.append(BlockNode(replace(cell.block, id=cell_id, attributes=attributes), cell.children))
        row_id = old_row.block.id if old_row else row.block.id
        final_rows.append(
            BlockNode(replace(row.block, id=row_id, attributes={**old_extra, **row.block.attributes}), tuple(cells))
        )

    final_cols = _strip_late_header(final_cols)
    final_rows = _strip_late_header(final_rows)
    attributes = {**_extra(old_table.block.attributes if old_table else None), **new_table.block.attributes}
    return BlockNode(replace(new_table.block, attributes=attributes), (*final_cols, *final_rows, *others))


def _strip_late_header(nodes: list[BlockNode]) -> list[BlockNode]:
    return [
        replace(n, block=replace(n.block, attributes={k: v for k, v in n.block.attributes.items() if k != "isHeader"}))
        if idx > 0 and n.block.attributes.get("isHeader") is True
        else n
        for idx, n in enumerate(nodes)
    ]


@dataclass(frozen=True, slots=True)
class _Placed:
    parent: str
    left: str
    block: Block


def _blocks_map(nodes: Sequence[BlockNode], parent: str, out: dict[str, _Placed]) -> dict[str, _Placed]:
    for idx, node in enumerate(nodes):
        if not node.block.id:
            continue
        left = nodes[idx - 1].block.id if idx > 0 else ""
        out[node.block.id] = _Placed(parent, left, node.block)
        _blocks_map(node.children, node.block.id, out)
    return out


def diff_operations(old: Sequence[BlockNode], new: Sequence[BlockNode]) -> list[dict[str, Any]]:
    """Ops turning the document `old` into `new`, trusting block ids (`computeReplaceOps` after
    `rebindTableIdentities`, as the Seed client's `document update` runs them).

    - `ReplaceBlock` for a block whose id is new, or whose type, text, link, annotations or attributes changed;
    - per level, one `MoveBlocks` listing all its blocks in order, only where that order differs from the old one;
    - one `DeleteBlocks` for every old id absent from the new tree (a moved block is not deleted).
    """
    old_map = _blocks_map(old, "", {})
    touched: set[str] = set()
    ops = _diff_level(old_map, rebind_table_identities(old, new), "", touched)
    deleted = [block_id for block_id in old_map if block_id not in touched]
    if deleted:
        ops.append({"type": "DeleteBlocks", "blocks": deleted})
    return ops


def _old_order(old_map: dict[str, _Placed], parent: str) -> list[str]:
    by_left = {entry.left: block_id for block_id, entry in old_map.items() if entry.parent == parent}
    order: list[str] = []
    cur = by_left.get("")
    while cur is not None and cur not in order:
        order.append(cur)
        cur = by_left.get(cur)
    return order


def _diff_level(
    old_map: dict[str, _Placed], tree: Sequence[BlockNode], parent: str, touched: set[str]
) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    ids: list[str] = []
    for node in tree:
        block_id = node.block.id
        touched.add(block_id)
        ids.append(block_id)
        old_entry = old_map.get(block_id)
        if old_entry is None or not _content_equal(old_entry.block, node.block):
            ops.append({"type": "ReplaceBlock", "block": block_to_op(node.block)})
        if node.children:
            ops.extend(_diff_level(old_map, node.children, block_id, touched))
    if ids and _old_order(old_map, parent) != ids:
        ops.append({"type": "MoveBlocks", "blocks": ids, "parent": parent})
    return ops


def _canonical(annotations: Sequence[Annotation]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for a in annotations:
        keep = [i for i, s in enumerate(a.starts) if (a.ends[i] if i < len(a.ends) else -1) > s]
        if not keep:
            continue
        attrs = json_stringify({k: a.attributes[k] for k in sorted(a.attributes)}) if a.attributes else None
        out.append((a.type, tuple(a.starts[i] for i in keep), tuple(a.ends[i] for i in keep), a.link or None, attrs))
    out.sort(key=lambda c: (c[1][0], -c[2][0], locale_compare_key(c[0])))
    return out


def _attrs_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    # JSON comparison, as the client does: `true` is not `1`, and a missing key is not a null one.
    return a.keys() == b.keys() and all(json_stringify(a[k]) == json_stringify(b[k]) for k in a)


def _content_equal(old: Block, new: Block) -> bool:
    if old.type != new.type or (old.text or "") != (new.text or "") or (old.link or "") != (new.link or ""):
        return False
    if _canonical(old.annotations) != _canonical(new.annotations):
        return False
    for key in _NATIVE_ATTRS:
        old_value, new_value = old.attributes.get(key), new.attributes.get(key)
        if (old_value if truthy(old_value) else "") != (new_value if truthy(new_value) else ""):
            return False
    return _attrs_equal(_extra(old.attributes), _extra(new.attributes))


def _leaves(value: Mapping[str, Any] | Sequence[Any], prefix: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []
    items = value.items() if isinstance(value, Mapping) else ((str(i), v) for i, v in enumerate(value))
    for k, v in items:
        # A flat "theme.headerLayout" names the same attribute as a nested theme: {headerLayout}.
        key = (*prefix, *(str(k).split(".") if not prefix else (str(k),)))
        if isinstance(v, Mapping | list | tuple):
            out.extend(_leaves(v, key))  # pyright: ignore[reportUnknownArgumentType]
        elif v is None or isinstance(v, str | int | float | bool):
            out.append((key, v))
    return out


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def metadata_operations(
    metadata: Mapping[str, Any], *, previous: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One `SetAttributes` op writing the metadata's leaves (`[]` when there are none).

    Nested maps become key paths (`theme: {headerLayout: X}` → `["theme", "headerLayout"]`), and so do dotted top-level
    keys. With `previous` (the document's current metadata) only changed and added leaves are written, and leaves
    that disappeared are set to null — the Seed CLI's `metadataDiffOp`.
    """
    old = dict(_leaves(previous or {}, ()))
    attrs: list[dict[str, Any]] = []
    seen: set[tuple[str, ...]] = set()
    for key, value in _leaves(metadata, ()):
        seen.add(key)
        if key not in old or not _same_value(old[key], value):
            attrs.append({"key": list(key), "value": value})
    attrs.extend({"key": list(key), "value": None} for key in old if key not in seen)
    return [{"type": "SetAttributes", "attrs": attrs}] if attrs else []
