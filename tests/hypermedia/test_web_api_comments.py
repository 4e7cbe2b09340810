"""Comments byte-identical to the official client's `createComment` (issue 19 point 1), checked against it
(tests/js/seed_oracle.mjs): for the same key, timestamp and content, every block type a comment may hold, the
annotations, the blocks the client drops, and a reply to a top-level comment; and the blocks it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blocks import (
    COMMENT_BLOCK_TYPES,
    Annotation,
    Block,
    BlockNode,
    comment_blocks,
    tree_to_json,
)
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.markdown import parse_markdown
from mcp_harness.hypermedia.node import comment_body
from tests.hypermedia.blob_cases import HEADS, KEY, OTHER, ROOT_COMMENT, TS, VERSION
from tests.js_oracle import run_seed_oracle

EMBED = f"hm://{KEY.account_id}/notes#c1"
FILE = "ipfs://bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"


def _node(block_id: str, kind: str, text: str = "", *children: BlockNode, **extra: Any) -> BlockNode:
    annotations = tuple(extra.pop("annotations", ()))
    link = extra.pop("link", None)
    return BlockNode(Block(block_id, kind, text, link, annotations, extra), tuple(children))


RICH = (
    _node(
        "p1",
        "Paragraph",
        "bold link red",
        annotations=[
            Annotation("Bold", (0,), (4,)),
            Annotation("Link", (5,), (9,), link="https://example.org"),
            Annotation("TextColor", (10,), (13,), attributes={"value": "red"}),
            Annotation("Embed", (13,), (14,), link=EMBED),
        ],
    ),
    _node("h1", "Heading", "Section", _node("p2", "Paragraph", "inside"), _node("c1", "Code", "x = 1", language="py")),
    _node("m1", "Math", "e^x"),
    _node("i1", "Image", "a heron", link=FILE, width=300),
    _node("v1", "Video", "ignored text", link=FILE, annotations=[Annotation("Bold", (0,), (1,))]),
    _node("f1", "File", "ignored", link=FILE, name="notes.pdf", size="1024"),
    _node("b1", "Button", "Go", link="https://example.org", annotations=[Annotation("Italic", (0,), (1,))]),
    _node("e1", "Embed", "ignored", link=EMBED, view="Card"),
    _node("w1", "WebEmbed", "", link="https://x.com/a/status/1"),
    _node("l1", "Paragraph", "", _node("l2", "Paragraph", "item"), childrenType="Unordered"),
    _node("x1", "Paragraph", ""),  # empty: the client leaves it out
    _node("s1", "Paragraph", "last"),
    _node("t1", "Heading", " "),  # trailing empty blocks are trimmed
    _node("t2", "Paragraph", ""),
)
MARKDOWN = (
    "# Herons\n\nWe saw **three** near the [river](https://example.org).\n\n- one\n- two\n\n```py\nprint(1)\n```\n"
)
DOC = {"uid": KEY.account_id, "path": ["notes"]}


def _ours(tree: tuple[BlockNode, ...], *, ts: int, reply: bool = False) -> blobs.Blob:
    thread = ROOT_COMMENT.cid if reply else None
    key = OTHER if reply else KEY
    body = comment_blocks(tree)
    return blobs.comment(
        key,
        space=KEY.account_id,
        path="/notes",
        version=HEADS,
        body=body,
        ts=ts,
        thread_root=thread,
        reply_parent=thread,
    )


def _client(tree: tuple[BlockNode, ...], *, ts: int, reply: bool = False) -> dict[str, Any]:
    command_input: dict[str, Any] = {"content": tree_to_json(tree), "docId": DOC, "docVersion": VERSION}
    seed = (OTHER if reply else KEY).seed.hex()
    if reply:  # a reply to a top-level comment: the client names it as both parent and root
        command_input |= {
            "replyCommentVersion": str(ROOT_COMMENT.cid),
            "rootReplyCommentVersion": str(ROOT_COMMENT.cid),
        }
    return {"op": "make", "kind": "comment", "seed": seed, "ts": ts, "input": command_input}


CASES: dict[str, tuple[tuple[BlockNode, ...], bool]] = {
    "every block type": (RICH, False),
    "parsed markdown": (parse_markdown(MARKDOWN).tree, False),
    "reply to a top-level comment": (parse_markdown("Agreed.").tree, True),
}
REFUSED = {
    "Table": (_node("t", "Table", "", _node("r", "TableRow", "")),),
    "Query": (_node("q", "Query", "", query={"includes": []}),),
    "Nostr": (_node("n", "Nostr", "", link="nostr://x"),),
}


@pytest.fixture(scope="module")
def oracle() -> list[dict[str, Any]]:
    commands = [_client(tree, ts=TS + i, reply=reply) for i, (tree, reply) in enumerate(CASES.values())]
    commands += [_client(tree, ts=TS) for tree in REFUSED.values()]
    return run_seed_oracle(commands)


@pytest.mark.parametrize("index", range(len(CASES)), ids=list(CASES))
def test_comment_blobs_are_byte_identical_to_create_comment(oracle: list[dict[str, Any]], index: int) -> None:
    tree, reply = list(CASES.values())[index]
    ours = _ours(tree, ts=TS + index, reply=reply)
    answer = oracle[index]
    assert "error" not in answer, answer
    assert decode(bytes.fromhex(answer["hex"])) == ours.value
    assert answer["hex"] == ours.data.hex() and answer["cid"] == str(ours.cid)


def test_the_published_shape_keeps_and_drops_what_the_client_does() -> None:
    body = {item["id"]: item for item in comment_blocks(RICH)}
    assert list(body) == ["p1", "h1", "m1", "i1", "v1", "f1", "b1", "e1", "w1", "l1", "s1"]
    assert all("children" in item for item in body.values()) and body["s1"]["children"] == []
    assert [c["id"] for c in body["h1"]["children"]] == ["p2", "c1"] and body["h1"]["children"][1]["language"] == "py"
    assert body["p1"]["annotations"][2] == {
        "type": "TextColor",
        "starts": [10],
        "ends": [13],
        "attributes": {"value": "red"},
    }
    assert body["v1"]["text"] == "" and "annotations" not in body["v1"]
    assert "annotations" not in body["b1"] and body["b1"]["text"] == "Go"
    for bare in ("f1", "e1", "w1"):
        assert "text" not in body[bare] and "annotations" not in body[bare], bare
    assert body["f1"]["name"] == "notes.pdf" and body["e1"]["view"] == "Card"


def test_a_reply_to_a_top_level_comment_names_it_as_parent_and_root() -> None:
    reply = _ours(parse_markdown("Agreed.").tree, ts=TS, reply=True)
    assert reply.value["replyParent"] == reply.value["threadRoot"] == ROOT_COMMENT.cid


@pytest.mark.parametrize("kind", list(REFUSED))
def test_blocks_the_client_refuses_are_refused_naming_what_is_accepted(oracle: list[dict[str, Any]], kind: str) -> None:
    answer = oracle[len(CASES) + list(REFUSED).index(kind)]
    assert "Unsupported block type" in answer["error"]
    with pytest.raises(BadRequest) as refused:
        comment_blocks(REFUSED[kind])
    assert kind in refused.value.message and all(t in refused.value.message for t in COMMENT_BLOCK_TYPES)


def test_an_unknown_annotation_and_overlapping_colours_are_refused() -> None:
    odd = (_node("p", "Paragraph", "abc", annotations=[Annotation("Sparkle", (0,), (1,))]),)
    with pytest.raises(BadRequest):
        comment_blocks(odd)
    red, blue = ({"value": "red"}, {"value": "blue"})
    clash = [Annotation("TextColor", (0,), (2,), attributes=red), Annotation("TextColor", (1,), (3,), attributes=blue)]
    with pytest.raises(BadRequest):
        comment_blocks((_node("p", "Paragraph", "abc", annotations=clash),))


def test_a_comment_whose_blocks_are_all_empty_is_refused_not_signed_as_a_deletion() -> None:
    # An empty body is a tombstone: a comment that loses every block to the client's rules must not become one.
    with pytest.raises(BadRequest):
        comment_body((_node("x", "Paragraph", ""), _node("y", "Heading", " ")))
    assert comment_body(parse_markdown("Hi.").tree)[0]["children"] == []
