"""Parsing markdown into Seed block trees and metadata, as the client does."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.hypermedia.blocks import tree_to_json, walk
from mcp_harness.hypermedia.markdown import ID_CHARS, new_block_id, parse_frontmatter, parse_markdown
from tests.hypermedia.markdown.cases import CORPUS, DEVIATION_DOCS, FUZZ, _answer, _code_points, parse


def test_the_oracle_is_the_real_client(oracle: dict[str, list[Any]]) -> None:
    first = _answer(oracle["parse"], 0)
    assert first["hm"][0]["block"]["text"] == "Hello world and it code link \ufffc end"
    assert len(oracle["parse"]) == len(CORPUS) + len(FUZZ) + len(DEVIATION_DOCS)
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=list(CORPUS))
def test_parse_gives_the_clients_block_tree_and_metadata(oracle: dict[str, list[Any]], index: int) -> None:
    reference = _answer(oracle["parse"], index)
    ours = parse(list(CORPUS.values())[index])
    assert tree_to_json(ours.tree) == _code_points(reference["hm"])
    assert ours.metadata == reference["metadata"]


def test_annotation_offsets_equal_the_clients_for_bmp_text(oracle: dict[str, list[Any]]) -> None:
    for index, markdown in enumerate(CORPUS.values()):
        if any(ord(ch) > 0xFFFF for ch in markdown):
            continue
        assert tree_to_json(parse(markdown).tree) == _answer(oracle["parse"], index)["hm"]


def test_astral_offsets_count_code_points_where_the_client_counts_utf16_units(oracle: dict[str, list[Any]]) -> None:
    index = list(CORPUS).index("astral characters")
    reference = _answer(oracle["parse"], index)["hm"][0]["block"]
    ours = parse(CORPUS["astral characters"]).tree[0].block
    bold = next(a for a in ours.annotations if a.type == "Bold")
    assert ours.text[bold.starts[0] : bold.ends[0]] == "bold 🎉"
    assert bold.starts == (2,)  # "🎉 " is two code points
    assert next(a for a in reference["annotations"] if a["type"] == "Bold")["starts"] == [3]  # and three UTF-16 units


def test_parse_agrees_with_the_client_on_random_fragment_soup(oracle: dict[str, list[Any]]) -> None:
    for index, markdown in enumerate(FUZZ):
        reference = _answer(oracle["parse"], len(CORPUS) + index)
        assert tree_to_json(parse(markdown).tree) == _code_points(reference["hm"]), markdown


def test_yaml_anchors_and_tags_are_read_as_the_client_reads_them(oracle: dict[str, list[Any]]) -> None:
    """Once a deliberate difference, now read as the client's `yaml` package reads them (issue 19; the cases are in
    tests/hypermedia/markdown/test_yaml_properties.py)."""
    markdown = DEVIATION_DOCS["yaml anchors and tags"]
    reference = _answer(oracle["parse"], len(CORPUS) + len(FUZZ))
    assert reference["metadata"] == {"name": "x", "other": "x", "count": "123"}
    assert parse_frontmatter(markdown) == ("body", reference["metadata"])


def test_ids_from_markers_are_kept() -> None:
    parsed = parse(CORPUS["table with identity"] + "\n\n" + CORPUS["block embeds and typed blocks"])
    ids = [node.block.id for _, node in walk(parsed.tree)]
    for marker_id in ("TBL", "c1", "c2", "r1", "r2", "e1", "b1", "q1", "v1"):
        assert marker_id in ids
    table = parsed.tree[0]
    assert [c.block.type for c in table.children] == ["TableColumn", "TableColumn", "TableRow", "TableRow", "TableRow"]
    assert table.children[1].block.attributes == {"width": 120}
    assert all(cell.block.attributes["columnId"] in ("c1", "c2") for cell in table.children[3].children)


def test_attributes_land_in_block_attributes() -> None:
    tree = parse("# H\n\n- a\n\n```rust\nfn\n```").tree
    heading = tree[0]
    assert heading.block.attributes == {"childrenType": "Group"}
    container = heading.children[0]
    assert container.block.text == "" and container.block.attributes == {"childrenType": "Unordered"}
    assert heading.children[1].block.attributes == {"language": "rust"}


def test_fresh_ids_are_eight_characters_of_the_id_alphabet() -> None:
    ids = [node.block.id for _, node in walk(parse_markdown("# a\n\nb\n\n- c\n- d").tree)]
    assert len(set(ids)) == len(ids) == 4  # the list nests under "b"
    assert all(len(i) == 8 and set(i) <= set(ID_CHARS) for i in ids)
    assert len(new_block_id()) == 8
