"""Document operations from a tree and from an edit (diff), and block ids matched across an edit, as the client
makes them."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.hypermedia.blocks import tree_to_json, walk
from mcp_harness.hypermedia.markdown import (
    carries_block_ids,
    diff_operations,
    document_operations,
    match_block_ids,
    render_markdown,
)
from tests.hypermedia.markdown.cases import (
    CORPUS,
    DIFF_CASES,
    EDIT_FUZZ,
    MATCH_CASES,
    OLD_DOC,
    OLD_TABLE,
    RENDER_TREES,
    _answer,
    _canonical,
    _code_points,
    _from_json,
    _old_tree_json,
    _reference_ops,
    parse,
)


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=list(CORPUS))
def test_document_operations_equal_the_clients_flatten(oracle: dict[str, list[Any]], index: int) -> None:
    reference = _answer(oracle["parse"], index)
    assert document_operations(parse(list(CORPUS.values())[index]).tree) == _reference_ops(reference["ops"])


def test_document_operations_inline_annotation_attributes_for_go() -> None:
    ops = document_operations(parse('<span style="color:red">c</span>').tree)
    assert ops[0]["block"]["annotations"] == [{"type": "TextColor", "starts": [0], "ends": [1], "value": "red"}]
    assert ops[-1] == {"type": "MoveBlocks", "blocks": [ops[0]["block"]["id"]], "parent": ""}


@pytest.mark.parametrize("index", range(len(DIFF_CASES)), ids=list(DIFF_CASES))
def test_diff_operations_equal_the_clients_update(oracle: dict[str, list[Any]], index: int) -> None:
    old_markdown, new_markdown = list(DIFF_CASES.values())[index]
    old = _from_json(_old_tree_json(old_markdown))
    assert diff_operations(old, parse(new_markdown).tree) == _reference_ops(_answer(oracle["diff"], index))


def test_diff_operations_agree_with_the_client_on_random_edits(oracle: dict[str, list[Any]]) -> None:
    offset = len(DIFF_CASES) + 1
    for index, (old, new) in enumerate(EDIT_FUZZ):
        reference = _reference_ops(_answer(oracle["diff"], offset + index))
        assert diff_operations(_from_json(old), parse(new).tree) == reference, new


def _diff(case: str) -> list[dict[str, Any]]:
    old_markdown, new_markdown = DIFF_CASES[case]
    return diff_operations(_from_json(_old_tree_json(old_markdown)), parse(new_markdown).tree)


def test_an_unchanged_document_needs_no_operations() -> None:
    assert _diff("unchanged") == []


def test_an_edit_replaces_only_the_edited_block_under_its_old_id() -> None:
    ops = _diff("one paragraph edited")
    edited = {"type": "Paragraph", "id": "p1", "text": "First paragraph, edited", "annotations": []}
    assert ops == [{"type": "ReplaceBlock", "block": edited}]


def test_removed_blocks_are_deleted_and_moved_blocks_are_not() -> None:
    assert _diff("paragraph removed")[-1] == {"type": "DeleteBlocks", "blocks": ["p2"]}
    moved = _diff("list item moved out of the heading")
    assert not any(op["type"] == "DeleteBlocks" for op in moved)
    assert {"type": "MoveBlocks", "blocks": ["t", "p3", "i2"], "parent": ""} in moved


def test_a_table_cell_edit_reuses_the_old_cell_id() -> None:
    old = _from_json(_old_tree_json(OLD_TABLE))
    row = next(n for _, n in walk(old) if n.block.id == "r1")
    ops = _diff("table cell edited")
    assert [op["type"] for op in ops] == ["ReplaceBlock"]
    assert ops[0]["block"]["id"] == row.children[1].block.id
    assert ops[0]["block"]["text"] == "31"
    kept = _diff("table column width dropped from markdown is kept")
    assert kept == []


@pytest.mark.parametrize("index", range(len(MATCH_CASES)), ids=list(MATCH_CASES))
def test_match_block_ids_equals_the_clients(oracle: dict[str, list[Any]], index: int) -> None:
    old_markdown, new_markdown = list(MATCH_CASES.values())[index]
    old = _from_json(_old_tree_json(old_markdown))
    matched = match_block_ids(old, parse(new_markdown).tree)
    assert tree_to_json(matched) == _answer(oracle["match"], index)


def test_match_block_ids_agrees_with_the_client_on_random_unmarked_edits(oracle: dict[str, list[Any]]) -> None:
    checked = 0
    for index, (old_json, new) in enumerate(EDIT_FUZZ):
        old, tree = _from_json(old_json), parse(new).tree
        if {n.block.id for _, n in walk(tree)} & {n.block.id for _, n in walk(old)}:
            continue  # markers present: our rule lets them win (test_match_block_ids_lets_marker_ids_win)
        checked += 1
        reference = _code_points(_answer(oracle["match"], len(MATCH_CASES) + index))
        assert tree_to_json(match_block_ids(old, tree)) == reference, new
    assert checked > 30


def test_updating_from_markdown_without_markers_keeps_surviving_ids() -> None:
    old = _from_json(
        _old_tree_json("# Title <!-- id:t -->\n\nFirst para <!-- id:p1 -->\n\nSecond **para** <!-- id:p2 -->")
    )
    markdown = "# Title\n\nFirst para\n\nSecond **para**, edited\n"
    new = parse(markdown).tree
    assert not carries_block_ids(markdown, new)
    ops = diff_operations(old, match_block_ids(old, new))
    assert ops == [
        {
            "type": "ReplaceBlock",
            "block": {
                "type": "Paragraph",
                "id": "p2",
                "text": "Second para, edited",
                "annotations": [{"type": "Bold", "starts": [7], "ends": [11]}],
            },
        }
    ]
    assert carries_block_ids(OLD_DOC, parse(OLD_DOC).tree)


def test_match_block_ids_lets_marker_ids_win() -> None:
    """Our addition to the client's positional rule: with markers present, explicit ids are never reassigned."""
    old = _from_json(_old_tree_json(OLD_DOC))
    markdown = OLD_DOC.replace("First para <!-- id:p1 -->\n\n", "").replace("After <!-- id:p3 -->", "After")
    matched = match_block_ids(old, parse(markdown).tree)
    assert [n.block.id for n in matched] == ["t", "p3"]
    assert [n.block.id for n in matched[0].children] == ["p2", "L"]
    assert diff_operations(old, matched) == [
        {"type": "MoveBlocks", "blocks": ["p2", "L"], "parent": "t"},
        {"type": "DeleteBlocks", "blocks": ["p1"]},
    ]


def test_a_childless_group_block_is_not_replaced_for_nothing(oracle: dict[str, list[Any]]) -> None:
    """Deliberate difference: the client compares the `childrenType` a marker's attrs carry against the parser's
    own (absent) `childrenType`, so it replaces such a block on every update; with attributes merged we see them
    equal and emit nothing."""
    old = _canonical(_from_json(RENDER_TREES["rich blocks"]))
    assert diff_operations(old, parse(render_markdown(old, {})).tree) == []
    client = _answer(oracle["diff"], len(DIFF_CASES))
    assert [(op["type"], op["block"]["id"]) for op in client] == [("ReplaceBlock", "leaf")]
