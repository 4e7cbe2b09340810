"""Frontmatter and metadata operations, as the client writes and reads them."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.hypermedia.blocks import Annotation, Block
from mcp_harness.hypermedia.markdown import emit_frontmatter, metadata_operations, parse_frontmatter, render_markdown
from tests.hypermedia.markdown.cases import FRONTMATTER_CASES, _answer, parse


@pytest.mark.parametrize("index", range(len(FRONTMATTER_CASES)))
def test_frontmatter_is_written_and_read_as_the_client_does(oracle: dict[str, list[Any]], index: int) -> None:
    reference = _answer(oracle["frontmatter"], index)
    assert emit_frontmatter(FRONTMATTER_CASES[index]) == reference["text"]
    assert parse_frontmatter(reference["text"] + "body\n") == ("body\n", reference["parsed"])


def test_metadata_round_trips_through_markdown() -> None:
    metadata = {
        "name": "Doc: the sequel",
        "summary": "two\nlines",
        "theme": {"headerLayout": "Center"},
        "showOutline": False,
        "cover": "ipfs://bafy",
    }
    assert parse(render_markdown((), metadata)).metadata == metadata
    assert render_markdown((), None) == "---\n---\n"


def test_metadata_operations_write_leaf_paths() -> None:
    assert metadata_operations({}) == []
    ops = metadata_operations({"name": "N", "theme": {"headerLayout": "Center"}, "theme.other": 1, "n": None})
    assert ops == [
        {
            "type": "SetAttributes",
            "attrs": [
                {"key": ["name"], "value": "N"},
                {"key": ["theme", "headerLayout"], "value": "Center"},
                {"key": ["theme", "other"], "value": 1},
                {"key": ["n"], "value": None},
            ],
        }
    ]


def test_metadata_operations_against_previous_metadata_write_only_changes() -> None:
    previous = {"name": "Old", "summary": "Same", "theme": {"headerLayout": "Center"}, "showOutline": True}
    current = {"name": "New", "summary": "Same", "showOutline": 1, "icon": "ipfs://x"}
    assert metadata_operations(current, previous=previous) == [
        {
            "type": "SetAttributes",
            "attrs": [
                {"key": ["name"], "value": "New"},
                {"key": ["showOutline"], "value": 1},
                {"key": ["icon"], "value": "ipfs://x"},
                {"key": ["theme", "headerLayout"], "value": None},
            ],
        }
    ]
    assert metadata_operations(previous, previous=previous) == []


def test_annotation_and_block_types_are_the_shared_model() -> None:
    block = parse("**x**").tree[0].block
    assert isinstance(block, Block) and block.annotations == (Annotation("Bold", (0,), (1,)),)
