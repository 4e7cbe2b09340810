"""The client's answers to every case in one batch, once for this folder."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.hypermedia.blocks import tree_to_json
from mcp_harness.hypermedia.markdown import render_markdown
from tests.hypermedia.markdown.cases import (
    CORPUS,
    DEVIATION_DOCS,
    DIFF_CASES,
    EDIT_FUZZ,
    FRONTMATTER_CASES,
    FUZZ,
    MATCH_CASES,
    RENDER_TREES,
    _canonical,
    _from_json,
    _old_tree_json,
    _render_request,
    _utf16,
    parse,
)
from tests.js_oracle import run_js


@pytest.fixture(scope="package")
def oracle() -> dict[str, list[Any]]:
    corpus_parses = [parse(md) for md in CORPUS.values()]
    rich = _canonical(_from_json(RENDER_TREES["rich blocks"]))
    request = {
        "parse": [*CORPUS.values(), *FUZZ, *DEVIATION_DOCS.values()],
        "render": [
            *(_render_request(p.tree, p.metadata) for p in corpus_parses),
            *(_render_request(_from_json(tree), {"name": "N"}) for tree in RENDER_TREES.values()),
            *({"metadata": {}, "content": tree, "options": {}} for tree in RENDER_TREES.values()),
            *(_render_request(parse(md).tree, {}) for md in FUZZ),
        ],
        "diff": [
            *({"old": _old_tree_json(old), "markdown": new} for old, new in DIFF_CASES.values()),
            {"old": tree_to_json(rich), "markdown": render_markdown(rich, {})},
            *({"old": _utf16(old), "markdown": new} for old, new in EDIT_FUZZ),
        ],
        "match": [
            *({"old": _old_tree_json(old), "markdown": new} for old, new in MATCH_CASES.values()),
            *({"old": _utf16(old), "markdown": new} for old, new in EDIT_FUZZ),
        ],
        "frontmatter": FRONTMATTER_CASES,
    }  # fmt: skip
    return run_js("markdown_oracle.mjs", request)
