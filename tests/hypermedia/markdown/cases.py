"""The cases every markdown suite here shares, and the helpers that put the client's answers in our units."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from mcp_harness.hypermedia.blocks import BlockNode, tree_from_json, tree_to_json
from mcp_harness.hypermedia.markdown import ParsedMarkdown, parse_markdown, render_markdown
from mcp_harness.hypermedia.markdown.inline import merge_annotations

HM = "hm://z6MkhUgmKmFbBGSDbSTGtA8UFZBLAzWuN3o8BnuPXTJvGLGg"

# ≥ 20 documents covering the dialect; names say what each one exercises.
CORPUS: dict[str, str] = {
    "inline formatting": "Hello **world** and *it* `code` [link](https://x.y) <hm://z6Mk/abc> end\n",
    "escapes and html inline": '\\*not\\* \\_it\\_ a<br>b <u>u</u> <mark>m</mark> <span style="color:red">red</span>',
    "nested and overlapping marks": "**bold _both_ bold** *it **x*** [**bl** t](https://a.b/(c)) ``a`b`` ` x `",
    "frontmatter with title alias": "---\ntitle: My Doc\nsummary: A summary\nshowOutline: yes\n"
    "theme:\n  headerLayout: Center\ncover: ipfs://bafyabc\ndate: 2024-01-02\ncount: 3\n---\n\n# Hello\n\nBody",
    "frontmatter name wins over title": "---\nname: Real\ntitle: Alias\ntags: [a, 'b c', 3]\n---\nText",
    "frontmatter coercions": "---\nname: 123\ndisplayAuthor: true\nshowActivity: 0\nicon: null\n---\n",
    "frontmatter yaml features": "---\n# comment\nsummary: >\n  folded\n  text\n\n  para\nname: |+\n  keep\n\n"
    "icon: 'single\n  quoted'  # trailing\ncover: \"dq \\u00e9 \\x41\n  next\"\nmap: {a: 1, b: [x, y], 'c d': null}\n"
    "plain: multi\n  line plain\nlist:\n- a\n- b: 1\n  c: 2\n- - nested\n  - seq\n"
    'num: [0o17, 0x1F, 1e3, +12, 007, 1_000, -0.5]\n? explicit\nempty:\nquoted key: "v"\n"k:": v2\n---\nbody',
    "broken frontmatter stays content": "---\nname: [unclosed\n---\nBody text",
    "headings nest by level": "# One\n\nPara one\nline two joins\n\n## Sub\n\nUnder sub\n\n### Deep\n\nx\n\n# Two\n\ny",
    "skipped heading levels": "### Starts deep\n\ntext\n\n# Then shallow\n\n###### six\n\nz",
    "heading end marker": "# H <!-- id:h1 -->\n\n- a <!-- id:a -->\n\ntext after\n\n<!-- end:h1 -->\n\nouter",
    "lists nest": "- a\n- b\n  - c\n    - d\n- e\n\n1. x\n2. y\n   1. z\n\n3) w",
    "list under paragraph": "Intro:\n- one\n- two\n\nNext para\n\n1. first\n2. second",
    "list under heading then prose": "# Tasks\n\n- one\n- two\n\nProse after the list",
    "standalone marker for a list": "<!-- id:LIST1 -->\n- a <!-- id:i1 -->\n- b <!-- id:i2 -->\n",
    "blockquote": "> quote line\n> another\n\n> single",
    "code fences": "```python <!-- id:code1 -->\nprint(1)\n\n  indented\n```\n\n"
    "````\n```inner```\n````\n\n```\nno lang",
    "math": "$$ <!-- id:m1 -->\nE = mc^2\n\\frac{a}{b}\n$$\n\n$$\nx",
    "images": "![alt *b*](img.png) <!-- id:img1 -->\n\n![](ipfs://bafyimg)\n\n![a](<https://x.y/a b.png>)",
    "block embeds and typed blocks": f'<{HM}/doc> <!-- id:e1 type:Embed attrs:{{"view":"Card"}} -->\n\n'
    '[Click me](https://b.c) <!-- id:b1 type:Button attrs:{"alignment":"center"} -->\n\n'
    '<!-- id:q1 type:Query attrs:{"style":"Card","query":{"includes":[{"space":"z6Mk","mode":"Children"}]}} -->\n\n'
    '<ipfs://bafyvid> <!-- id:v1 type:Video attrs:{"width":640.5} -->',
    "inline embeds": f"See <{HM}/a?v=1#blk> and <{HM}> twice. Also <https://auto.link/x>.",
    "table with identity": '<!-- id:TBL -->\n| Name <!-- col:c1 --> | Age <!-- col:c2 attrs:{"width":120} --> |\n'
    "| --- | --- |\n| Alice | 30 <!-- id:r1 --> |\n| **Bob** \\| pipe | 31 <!-- id:r2 --> |",
    "table without header or ids": "| a | b | c |\n| 1 | 2 |\n| --- | --- |\n| x | y | z |",
    "table inside a list": "- item\n  <!-- id:T2 -->\n  | h <!-- col:k1 --> |\n  | --- |\n  | v <!-- id:rr --> |",
    "attrs on plain blocks": 'Para <!-- id:p1 attrs:{"childrenType":"Group","x-y":"a-\\u002db"} -->\n\n'
    "<!-- id:empty1 -->\n\n# Head <!-- id:hh type:Heading -->",
    "astral characters": "🎉 **bold 🎉** and `c🎉de` <hm://z6Mk/x> after 👍🏽 [l🎉](https://e.x)",
    "crlf, tabs and bom": "\ufeff# Title\r\n\r\n\t- tab item\r\n\r\nline\r\n",
    "whitespace-only code span": "` ` and `  `",
    "link edge cases": "[a](b) [](empty) [x]() [[nested]](u) [no close](u ![img](i.png) inline",
    "deep indentation": "- a\n    - b four\n        - c eight\n  - d two\n\n      para indented six",
    "empty": "",
}

# Hand-built trees in the API shape: what `read` gets from the Seed API, rendered by both sides.
RENDER_TREES: dict[str, list[dict[str, Any]]] = {
    "rich blocks": [
        {
            "block": {"id": "h1", "type": "Heading", "text": "Title", "annotations": [], "attributes": {}},
            "children": [
                {
                    "block": {
                        "id": "p1",
                        "type": "Paragraph",
                        "text": "Colored overlap and mention \ufffc end ",
                        "annotations": [
                            {"type": "Bold", "starts": [0], "ends": [15]},
                            {"type": "Italic", "starts": [8], "ends": [22]},
                            {"type": "TextColor", "starts": [0], "ends": [7], "attributes": {"value": "#f00"}},
                            {"type": "Embed", "starts": [28], "ends": [29], "link": f"{HM}/x"},
                            {"type": "Code", "starts": [16], "ends": [19]},
                        ],
                        "attributes": {},
                    }
                },
                {
                    "block": {
                        "id": "img",
                        "type": "Image",
                        "text": "alt",
                        "link": "ipfs://bafyimg",
                        "annotations": [],
                        "attributes": {"width": 320, "name": "pic.png"},
                    }
                },
                {
                    "block": {
                        "id": "emb",
                        "type": "Embed",
                        "text": "",
                        "link": f"{HM}/doc",
                        "annotations": [],
                        "attributes": {"view": "Content"},
                    }
                },
            ],
        },
        {
            "block": {
                "id": "grp",
                "type": "Paragraph",
                "text": "",
                "annotations": [],
                "attributes": {"childrenType": "Ordered", "columnCount": 2},
            },
            "children": [
                {"block": {"id": "o1", "type": "Paragraph", "text": "# not a heading", "annotations": []}},
                {"block": {"id": "o2", "type": "Code", "text": "a ``` b", "attributes": {"language": "js"}}},
            ],
        },
        {
            "block": {
                "id": "leaf",
                "type": "Paragraph",
                "text": "leaf with Group",
                "annotations": [],
                "attributes": {"childrenType": "Group"},
            }
        },
        {"block": {"id": "btn", "type": "Button", "text": "Go", "link": "https://go.to", "attributes": {}}},
        {"block": {"id": "wq", "type": "Query", "text": "", "attributes": {"style": "List", "banner": True}}},
        {"block": {"id": "eq", "type": "Math", "text": "a\n\nb", "attributes": {}}},
    ],
    "table with widths and header column": [
        {
            "block": {"id": "T", "type": "Table", "text": "", "attributes": {}},
            "children": [
                {"block": {"id": "c1", "type": "TableColumn", "attributes": {"width": 200, "isHeader": True}}},
                {"block": {"id": "c2", "type": "TableColumn", "attributes": {}}},
                {
                    "block": {"id": "r0", "type": "TableRow", "attributes": {"isHeader": True}},
                    "children": [
                        {"block": {"id": "x1", "type": "Paragraph", "text": "A|B", "attributes": {"columnId": "c1"}}},
                        {"block": {"id": "x2", "type": "Paragraph", "text": "", "attributes": {"columnId": "c2"}}},
                    ],
                },
                {
                    "block": {"id": "r1", "type": "TableRow", "attributes": {}},
                    "children": [
                        {
                            "block": {
                                "id": "x3",
                                "type": "Paragraph",
                                "text": "two\nlines",
                                "annotations": [{"type": "Bold", "starts": [0], "ends": [3]}],
                                "attributes": {"columnId": "c1"},
                            }
                        },
                    ],
                },
            ],
        }
    ],
}

FRONTMATTER_CASES: list[dict[str, Any]] = [
    {},
    {"name": "Doc", "summary": "S", "theme": {"headerLayout": "Center"}, "showOutline": True},
    {"name": "true", "icon": "123", "cover": "a: b", "summary": "line1\nline2", "layout": "# hash"},
    {"name": 'it\'s "quoted"', "siteUrl": " lead", "displayAuthor": "trail ", "displayPublishTime": "2024-01-02"},
    {"tags": ["a", "b"], "empty": [], "map": {}, "n": 1.5, "i": 3, "big": 1e21, "nothing": None},
    {"Zeta": 1, "alpha": 2, "beta_2": 3, "beta-1": 4, "beta1": 5, "_x": 6, "Alpha": 7, "ébc": 8, "a b": 9},
    {"name": "a\n\n", "summary": "\n lead", "icon": "x\n ", "cover": "  two\nlines"},
    {"name": "control \x01 and a string long enough to fold its\nnewlines", "summary": "---", "---": "v"},
    {"list": [{"a": 1, "b": [1, 2]}, [3, 4], "x\ny", None]},
]


# Where we knowingly read differently from the client; each has a test saying why.
DEVIATION_DOCS: dict[str, str] = {
    "yaml anchors and tags": "---\nname: &a x\nother: *a\ncount: !!str 123\n---\nbody",
}


def _random_frontmatter(rng: random.Random) -> dict[str, Any]:
    alphabet = "ab :#-?'\"\n\t|>{}[],&*!%@`\\ é🎉\x01~.0123456789eE+"
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
    return {"name": text, "k" + text.replace("\n", ""): text}


FRONTMATTER_CASES += [_random_frontmatter(random.Random(seed)) for seed in range(150)]

_WORD = "abcxyz019 *_`[]()<>|\\#~-$:!é🎉."
_FRAGMENTS = (
    "# Heading {w}", "## Sub {w}", "###### six {w}", "- item {w}", "  - nested {w}", "    - deeper {w}",
    "1. first {w}", "2) second {w}", "> quote {w}", "{w} **b** *i* _u_ `c` ~~s~~ {w}", "```js", "```", "$$",
    "x^2 {w}", "![alt {w}](img.png)", "![x](ipfs://bafy{n})", "| a | b |", "| --- | --- |",
    "| 1 {w} | 2 <!-- id:r{n} --> |", "| Name <!-- col:c{n} --> | V |", "<!-- id:s{n} -->", "<!-- end:h{n} -->",
    "# H <!-- id:h{n} -->", "text {w} <!-- id:p{n} -->",
    '<hm://z6Mk{n}> <!-- id:e{n} type:Embed attrs:{{"view":"Card"}} -->',
    "", "", "", "    indented {w}", "\t- tab item {w}", "[link {w}](https://ex.com/{n})", "<https://auto.link/{n}>",
    "inline <hm://z6Mkabc/doc?v=1#blk> mention {w}", "\\*escaped\\* {w}",
    '<u>u</u><mark>m</mark><span style="color:red">c</span>',
    "a<br>b {w}", "🎉 astral **x{w}**", "{w}", "{w} {w}", "plain words here",
    '[Click](https://b.c) <!-- id:b{n} type:Button attrs:{{"alignment":"center"}} -->',
    '<!-- id:q{n} type:Query attrs:{{"style":"Card"}} -->',
)  # fmt: skip


def _fuzz_document(rng: random.Random) -> str:
    """Random lines of dialect fragments: mis-nested, unterminated and ambiguous input on purpose."""

    def word() -> str:
        return "".join(rng.choice(_WORD) for _ in range(rng.randint(1, 8)))

    return "\n".join(rng.choice(_FRAGMENTS).format(w=word(), n=rng.randint(0, 5)) for _ in range(rng.randint(1, 14)))


FUZZ = [_fuzz_document(random.Random(seed)) for seed in range(300)]


def _from_json(value: Sequence[Mapping[str, Any]]) -> tuple[BlockNode, ...]:
    return tree_from_json(list(value))


def counter_ids() -> Callable[[], str]:
    """The ids markdown_oracle.mjs makes the client generate: gen00000, gen00001, …"""
    n = 0

    def new_id() -> str:
        nonlocal n
        value = f"gen{n:05d}"
        n += 1
        return value

    return new_id


def parse(text: str) -> ParsedMarkdown:
    return parse_markdown(text, new_id=counter_ids())


# --- update cases: (old document markdown with ids, new markdown) ---------------------------------------------------

OLD_DOC = (
    "# Title <!-- id:t -->\n\nFirst para <!-- id:p1 -->\n\nSecond **para** <!-- id:p2 -->\n\n"
    "<!-- id:L -->\n- one <!-- id:i1 -->\n- two <!-- id:i2 -->\n\n<!-- end:t -->\n\nAfter <!-- id:p3 -->\n"
)
OLD_TABLE = (
    '<!-- id:TBL -->\n| Name <!-- col:c1 attrs:{"width":120} --> | Age <!-- col:c2 --> | <!-- id:hdr -->\n'
    "| --- | --- |\n| Alice | 30 <!-- id:r1 --> |\n| Bob | 31 <!-- id:r2 --> |\n"
)
DIFF_CASES: dict[str, tuple[str, str]] = {
    "unchanged": (OLD_DOC, OLD_DOC),
    "one paragraph edited": (OLD_DOC, OLD_DOC.replace("First para", "First paragraph, edited")),
    "annotation added": (OLD_DOC, OLD_DOC.replace("First para", "First **para**")),
    "paragraph removed": (OLD_DOC, OLD_DOC.replace("Second **para** <!-- id:p2 -->\n\n", "")),
    "paragraph inserted without id": (OLD_DOC, OLD_DOC.replace("After <", "New one\n\nAfter <")),
    "paragraphs swapped": (
        OLD_DOC,
        OLD_DOC.replace("First para <!-- id:p1 -->", "@@")
        .replace("Second **para** <!-- id:p2 -->", "First para <!-- id:p1 -->")
        .replace("@@", "Second **para** <!-- id:p2 -->"),
    ),
    "list item moved out of the heading": (
        OLD_DOC,
        OLD_DOC.replace("- two <!-- id:i2 -->\n", "").replace("After <!-- id:p3 -->", "@@\n\ntwo <!-- id:i2 -->")
        .replace("@@", "After <!-- id:p3 -->"),
    ),
    "list becomes ordered": (OLD_DOC, OLD_DOC.replace("- one", "1. one").replace("- two", "2. two")),
    "table cell edited": (OLD_TABLE, OLD_TABLE.replace("| Alice | 30 <", "| Alice | 31 <")),
    "table column width dropped from markdown is kept": (OLD_TABLE, OLD_TABLE.replace(' attrs:{"width":120}', "")),
    "table columns matched by header text": (
        OLD_TABLE,
        "<!-- id:TBL -->\n| Age | Name |\n| --- | --- |\n| 30 | Alice <!-- id:r1 --> |\n| 31 | Bob <!-- id:r2 --> |\n",
    ),
    "table row deleted": (OLD_TABLE, OLD_TABLE.replace("| Bob | 31 <!-- id:r2 --> |\n", "")),
    "everything replaced by unmarked text": (OLD_DOC, "Just one paragraph"),
}  # fmt: skip
MATCH_CASES: dict[str, tuple[str, str]] = {
    "same shape, edited text": (
        OLD_DOC,
        "# Title\n\nFirst para, edited\n\nSecond para\n\n- one\n- two\n\n<!-- end:x -->",
    ),
    "types differ at a position": (OLD_DOC, "Not a heading\n\n# Heading\n\ntext"),
    "longer than the old document": ("One <!-- id:a -->\n\nTwo <!-- id:b -->", "One\n\nTwo\n\nThree\n\n- four"),
    "tables are left to the rebind": (OLD_TABLE, "| Name | Age |\n| --- | --- |\n| Alice | 30 |"),
}


def _old_tree_json(markdown: str) -> list[dict[str, Any]]:
    """An old document in the API shape. Its fresh ids are `old00000`, … so they never collide with the fresh ids
    of the new markdown's parse (`gen00000`, …), as random ids would not."""
    n = iter(range(10_000))
    return tree_to_json(parse_markdown(markdown, new_id=lambda: f"old{next(n):05d}").tree)


def _edit_fuzz(seed: int) -> tuple[list[dict[str, Any]], str]:
    """An old document from fragment soup, and new markdown: its rendering with lines dropped, or edited and
    shuffled, or unrelated soup — updates a model might plausibly send, and some it should not."""
    rng = random.Random(1000 + seed)
    old = _old_tree_json(_fuzz_document(rng))
    lines = render_markdown(_from_json(old), {}).split("\n")
    mode = rng.randint(0, 2)
    if mode == 0:
        lines = [line for line in lines if rng.random() > 0.2]
    elif mode == 1:
        lines = [line.replace("a", "A", 1) if rng.random() < 0.3 else line for line in lines]
        if rng.random() < 0.2:
            rng.shuffle(lines)
    else:
        lines = _fuzz_document(rng).split("\n")
    return old, "\n".join(lines)


EDIT_FUZZ = [_edit_fuzz(seed) for seed in range(200)]


def _render_request(tree: tuple[BlockNode, ...], metadata: dict[str, Any]) -> dict[str, Any]:
    """A blocksToMarkdown call that keeps ipfs:// links, for a tree in our units (the client's are UTF-16)."""
    return {"metadata": metadata, "content": _utf16(tree_to_json(tree)), "options": {"ipfsGateway": False}}


# --- offset units ---------------------------------------------------------------------------------------------------


def _unit_maps(text: str) -> tuple[dict[int, int], dict[int, int]]:
    """UTF-16 offset → code-point offset, and back, for every boundary between characters of `text`."""
    to_cp: dict[int, int] = {}
    to_utf16: dict[int, int] = {}
    units = 0
    for i, ch in enumerate([*text, ""]):
        to_cp[units] = i
        to_utf16[i] = units
        units += 2 if ch and ord(ch) > 0xFFFF else 1
    return to_cp, to_utf16


def _convert(tree: list[dict[str, Any]], *, to_code_points: bool) -> list[dict[str, Any]]:
    tree = copy.deepcopy(tree)
    stack = list(tree)
    while stack:
        item = stack.pop()
        block = item.get("block", item)
        to_cp, to_utf16 = _unit_maps(block.get("text") or "")
        table = to_cp if to_code_points else to_utf16
        for ann in block.get("annotations") or []:
            ann["starts"] = [table.get(n, n) for n in ann["starts"]]
            ann["ends"] = [table.get(n, n) for n in ann["ends"]]
        stack.extend(item.get("children") or [])
    return tree


def _code_points(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _convert(tree, to_code_points=True)


def _utf16(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _convert(tree, to_code_points=False)


def _reference_ops(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client's ops in our units and shape: code-point offsets, and inline annotation attributes inlined (the
    client nests them under `attributes` in ReplaceBlock; Go's op decoder reads them inline)."""
    out = copy.deepcopy(ops)
    for op in out:
        if op["type"] != "ReplaceBlock":
            continue
        block = _code_points([op["block"]])[0]
        for ann in block.get("annotations") or []:
            ann.update(ann.pop("attributes", None) or {})
        op["block"] = block
    return out


def _answer(answers: list[Any], index: int) -> Any:
    answer = answers[index]
    assert not (isinstance(answer, dict) and "error" in answer), answer
    return answer


def _canonical(tree: tuple[BlockNode, ...]) -> tuple[BlockNode, ...]:
    """A tree in the form the parser produces: annotations merged and ordered, a Group `childrenType` on every
    parent that has none (tables and rows aside)."""
    out: list[BlockNode] = []
    for node in tree:
        block = replace(node.block, annotations=merge_annotations(node.block.annotations))
        if node.children and "childrenType" not in block.attributes and block.type not in ("Table", "TableRow"):
            block = replace(block, attributes={**block.attributes, "childrenType": "Group"})
        out.append(BlockNode(block, _canonical(node.children)))
    return tuple(out)
