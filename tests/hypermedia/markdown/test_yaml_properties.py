"""Frontmatter with YAML anchors, aliases and tags (issue 19 point 1), read as the official client reads it: its
`parseFrontmatter` (the `yaml` package's core schema) is the reference (tests/js/frontmatter_oracle.mjs)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.hypermedia.markdown import parse_frontmatter, parse_markdown
from mcp_harness.hypermedia.markdown.yaml import YamlError, parse_yaml
from tests.js_oracle import run_js


def _fm(yaml: str) -> str:
    return f"---\n{yaml}\n---\nbody\n"


CASES: dict[str, str] = {
    "scalar anchor and alias": _fm("name: &n Field notes\nsummary: *n"),
    "title through an alias": _fm("base: &t The title\ntitle: *t"),
    "map anchor": _fm("defaults: &d\n  headerLayout: Center\ntheme: *d\nname: x"),
    "sequence anchor": _fm("tags: &t [a, b]\nmore: *t\nname: x"),
    "block sequence anchor": _fm("tags: &t\n  - a\n  - b\nagain: *t\nname: y"),
    "anchor and tag together": _fm("name: !!str &n 42\nsummary: *n\ncount: &c !!int '7'\nc2: *c"),
    "core tags": _fm(
        'name: !!str 123\ni: !!int "12"\nh: !!int 0x1F\nf: !!float 1.5\nnotf: !!float 3\nb: !!bool true\n'
        "nb: !!bool yes\nz: !!null ~\ne: !!str\nv: !<tag:yaml.org,2002:str> 9"
    ),
    "local and non-specific tags": _fm("name: !custom 12\nsummary: ! 34\nicon: !important\nx: !thing {a: 1}"),
    "tagged collections": _fm("theme: !!map {headerLayout: Center}\nlist: !!seq [1, 2]\nname: n"),
    "tagged block collections": _fm("theme: !!map\n  headerLayout: Center\nlist: !!seq\n  - 1\nname: n"),
    "flow anchors and aliases": _fm("pair: [&a 1, *a, {k: *a}]\nname: &n flow\nsummary: *n"),
    "sequence items with properties": _fm("list:\n  - &x one\n  - *x\n  - !!str 3\n  - &m\n    k: v\n  - *m\nname: s"),
    "merge key is a plain key": _fm("base: &b {a: 1}\n<<: *b\nname: m"),
    "quoted text is not an alias": _fm("name: '*not an alias'\nsummary: \"&not an anchor\""),
    "unknown alias": _fm("name: *nowhere"),
    "alias before its anchor": _fm("name: *later\nother: &later x"),
    "named tag handle": _fm("name: !e!tag x"),
}
REFUSED_BY_BOTH = ("unknown alias", "alias before its anchor", "named tag handle")


@pytest.fixture(scope="module")
def oracle() -> list[dict[str, Any]]:
    return run_js("frontmatter_oracle.mjs", list(CASES.values()))


@pytest.mark.parametrize("name", list(CASES))
def test_frontmatter_with_node_properties_reads_as_the_client_reads_it(oracle: list[dict[str, Any]], name: str) -> None:
    reference = oracle[list(CASES).index(name)]
    assert "error" not in reference, reference
    assert parse_frontmatter(CASES[name]) == (reference["content"], reference["metadata"])
    if name in REFUSED_BY_BOTH:  # invalid YAML: the block stays in the content, as the client leaves it
        assert reference["metadata"] == {} and reference["content"] == CASES[name]


def test_a_document_with_anchored_frontmatter_gets_its_name() -> None:
    parsed = parse_markdown(_fm("name: &n Field notes\nsummary: *n") + "\n# Heading\n")
    assert parsed.metadata == {"name": "Field notes", "summary": "Field notes"}
    assert [node.block.text for node in parsed.tree] == ["body", "Heading"]


def test_aliases_share_the_anchored_value_and_a_billion_laughs_is_refused() -> None:
    shared = parse_yaml("a: &a [1, 2]\nb: *a")
    assert shared["a"] is shared["b"]
    laughs = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 6)]
    with pytest.raises(YamlError):
        parse_yaml("\n".join(laughs))
    with pytest.raises(YamlError):
        parse_yaml("a: &a x\n" + "\n".join(f"k{i}: *a" for i in range(101)))
