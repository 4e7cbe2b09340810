"""The blobs the blob suites share: Seed's test vector key, one blob per builder (with the client command that
builds the same one), and blobs built to be refused."""

from __future__ import annotations

from typing import Any

from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.cbor import encode
from mcp_harness.hypermedia.cid import CID, RAW, cid_of
from mcp_harness.hypermedia.ids import tsid
from mcp_harness.identity.keys import KeyPair
from tests.js_oracle import run_seed_oracle

# HYPERMEDIA §2: Seed's SLIP-10 test vector seed and the account id it gives.
VECTOR_SEED = bytes.fromhex("0dd692e7e203e73ef684b767e35396472c73c030593b6c1d05792c09331fb1fa")
VECTOR_ACCOUNT = "z6MkotYPjX4nWbLr8EES57Tma5sGksdaccUB7c1BdrJA6tQt"
KEY = KeyPair.from_seed(VECTOR_SEED)
OTHER = KeyPair.from_seed(bytes(range(32)))
TS = 1_764_500_000_123

GENESIS = blobs.genesis_change(KEY)
OPS: list[dict[str, Any]] = [
    {"type": "SetAttributes", "attrs": [{"key": ["name"], "value": "Plan"}, {"key": ["theme", "x"], "value": 3}]},
    {"type": "ReplaceBlock", "block": {"id": "b1", "type": "Heading", "text": "Goals", "annotations": []}},
    {
        "type": "ReplaceBlock",
        "block": {
            "id": "b2",
            "type": "Paragraph",
            "text": "ship it",
            "annotations": [{"type": "Bold", "starts": [0], "ends": [4]}],
            "childrenType": "Ordered",
            "width": 0.75,
        },
    },
    {"type": "MoveBlocks", "parent": "", "blocks": ["b1", "b2"]},
    {"type": "DeleteBlocks", "blocks": ["old"]},
]
FIRST = blobs.change(KEY, genesis=GENESIS.cid, deps=[GENESIS.cid], depth=1, ops=OPS[:2], ts=TS)
SIDE = blobs.change(KEY, genesis=GENESIS.cid, deps=[GENESIS.cid], depth=1, ops=OPS[3:4], ts=TS + 1)
# Given out of binary order on purpose: the builder sorts.
DEPS = sorted([FIRST.cid, SIDE.cid], key=CID.to_bytes, reverse=True)
SECOND = blobs.change(KEY, genesis=GENESIS.cid, deps=DEPS, depth=2, ops=OPS, ts=TS + 2)
HEADS = [SECOND.cid, SIDE.cid]
VERSION = ".".join(sorted(str(c) for c in HEADS))
CAPABILITY = blobs.capability(KEY, delegate=OTHER.account_id, ts=TS, path="/notes", label="editor")
AVATAR = f"ipfs://{cid_of(b'avatar image', RAW)}"


def _content(text: str, block_id: str, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A comment block in the client's input shape (`HMBlockNode`)."""
    block = {"id": block_id, "type": "Paragraph", "text": text, "annotations": [], "attributes": {}}
    return {"block": block, "children": children or []}


def _published(node: dict[str, Any]) -> dict[str, Any]:
    """The published comment block the client writes for a Paragraph node (comment.ts `blockToPublishable`)."""
    block = node["block"]
    return {
        "id": block["id"],
        "type": block["type"],
        "text": block["text"],
        "annotations": block["annotations"],
        **block["attributes"],
        "children": [_published(child) for child in node["children"]],
    }


CONTENT = [_content("Looks good", "c1", [_content("one nit", "c2")]), _content("thanks", "c3")]
BODY = [_published(node) for node in CONTENT]
ROOT_COMMENT = blobs.comment(KEY, space=KEY.account_id, path="/notes", version=HEADS, body=BODY, ts=TS)
COMMENT_TSID = tsid(ROOT_COMMENT.ts, ROOT_COMMENT.data)

# name -> (blob built here, the client command that builds the same blob, or None when the client has no builder)
CASES: dict[str, tuple[Blob, dict[str, Any] | None]] = {
    "genesis": (GENESIS, {"kind": "genesis"}),
    "change": (
        SECOND,
        {"kind": "change", "ts": TS + 2, "ops": OPS, "genesis": str(GENESIS.cid), "deps": [str(c) for c in DEPS[::-1]]}
        | {"depth": 2},
    ),
    "change with one op": (
        FIRST,
        {"kind": "change", "ts": TS, "ops": OPS[:2], "genesis": str(GENESIS.cid), "deps": [str(GENESIS.cid)]}
        | {"depth": 1},
    ),
    "ref": (
        blobs.ref(KEY, space=KEY.account_id, path="/notes", genesis=GENESIS.cid, heads=HEADS, generation=TS, ts=TS),
        {"kind": "versionRef", "ts": TS}
        | {"input": {"space": KEY.account_id, "path": "/notes", "genesis": str(GENESIS.cid), "version": VERSION}}
        | {"input_generation": TS},
    ),
    "ref of the home document, generation 0": (
        blobs.ref(KEY, space=KEY.account_id, path="", genesis=GENESIS.cid, heads=HEADS, generation=0, ts=TS),
        {"kind": "versionRef", "ts": TS}
        | {"input": {"space": KEY.account_id, "path": "", "genesis": str(GENESIS.cid), "version": VERSION}}
        | {"input_generation": 0},
    ),
    "ref in another space with a capability": (
        blobs.ref(
            OTHER,
            space=KEY.account_id,
            path="/notes/plan",
            genesis=GENESIS.cid,
            heads=[SECOND.cid],
            generation=7,
            ts=TS,
            capability=CAPABILITY.cid,
        ),
        {"kind": "versionRef", "ts": TS, "seed": OTHER.seed.hex()}
        | {"input": {"space": KEY.account_id, "path": "/notes/plan", "genesis": str(GENESIS.cid)}}
        | {"input_version": str(SECOND.cid), "input_capability": str(CAPABILITY.cid), "input_generation": 7},
    ),
    "tombstone ref": (
        blobs.ref(KEY, space=KEY.account_id, path="/old", genesis=GENESIS.cid, heads=[], generation=3, ts=TS),
        {"kind": "tombstoneRef", "ts": TS}
        | {"input": {"space": KEY.account_id, "path": "/old", "genesis": str(GENESIS.cid), "generation": 3}},
    ),
    "redirect ref": (
        blobs.ref(
            KEY,
            space=KEY.account_id,
            path="/old",
            genesis=GENESIS.cid,
            heads=[],
            generation=3,
            ts=TS,
            redirect={"space": OTHER.account_id, "path": "/new", "republish": True},
        ),
        {"kind": "redirectRef", "ts": TS}
        | {"input": {"space": KEY.account_id, "path": "/old", "genesis": str(GENESIS.cid), "generation": 3}}
        | {"input_targetPath": "/new", "input_targetSpace": OTHER.account_id, "input_republish": True},
    ),
    "redirect ref within the space": (
        blobs.ref(
            KEY,
            space=KEY.account_id,
            path="/old",
            genesis=GENESIS.cid,
            heads=[],
            generation=3,
            ts=TS,
            redirect={"space": KEY.account_id, "path": "/new"},
        ),
        {"kind": "redirectRef", "ts": TS}
        | {"input": {"space": KEY.account_id, "path": "/old", "genesis": str(GENESIS.cid), "generation": 3}}
        | {"input_targetPath": "/new", "input_targetSpace": KEY.account_id},
    ),
    "comment": (
        ROOT_COMMENT,
        {"kind": "comment", "ts": TS}
        | {"input": {"content": CONTENT, "docId": {"uid": KEY.account_id, "path": ["notes"]}, "docVersion": VERSION}},
    ),
    "comment on the home document": (
        blobs.comment(OTHER, space=KEY.account_id, path="", version=[SECOND.cid], body=BODY[1:], ts=TS),
        {"kind": "comment", "ts": TS, "seed": OTHER.seed.hex()}
        | {"input": {"content": CONTENT[1:], "docId": {"uid": KEY.account_id, "path": []}}}
        | {"input_docVersion": str(SECOND.cid)},
    ),
    "reply": (
        blobs.comment(
            OTHER,
            space=KEY.account_id,
            path="/notes",
            version=HEADS,
            body=BODY[1:],
            ts=TS + 5,
            thread_root=ROOT_COMMENT.cid,
            reply_parent=cid_of(b"a reply in the thread"),
        ),
        {"kind": "comment", "ts": TS + 5, "seed": OTHER.seed.hex()}
        | {"input": {"content": CONTENT[1:], "docId": {"uid": KEY.account_id, "path": ["notes"]}}}
        | {"input_docVersion": VERSION, "input_rootReplyCommentVersion": str(ROOT_COMMENT.cid)}
        | {"input_replyCommentVersion": str(cid_of(b"a reply in the thread"))},
    ),
    "comment edit": (
        blobs.comment(
            KEY, space=KEY.account_id, path="/notes", version=HEADS, body=BODY, ts=TS + 9, replaces=COMMENT_TSID
        ),
        {"kind": "updateComment", "ts": TS + 9}
        | {"input": {"commentId": f"{KEY.account_id}/{COMMENT_TSID}", "targetAccount": KEY.account_id}}
        | {"input_targetPath": "/notes", "input_targetVersion": VERSION, "input_content": CONTENT},
    ),
    "comment deletion": (
        blobs.comment(
            KEY, space=KEY.account_id, path="/notes", version=HEADS, body=[], ts=TS + 9, replaces=COMMENT_TSID
        ),
        {"kind": "deleteComment", "ts": TS + 9}
        | {"input": {"commentId": f"{KEY.account_id}/{COMMENT_TSID}", "targetAccount": KEY.account_id}}
        | {"input_targetPath": "/notes", "input_targetVersion": VERSION},
    ),
    "profile": (
        blobs.profile(KEY, name="Ada", ts=TS, avatar=AVATAR, description="Writes the plans. ✍️"),
        {"kind": "profile", "ts": TS, "input": {"name": "Ada", "avatar": AVATAR, "description": "Writes the plans. ✍️"}},
    ),
    "profile with a name only": (
        blobs.profile(KEY, name="Ada", ts=TS),
        {"kind": "profile", "ts": TS, "input": {"name": "Ada"}},
    ),
    "writer capability": (
        CAPABILITY,
        {"kind": "capability", "ts": TS}
        | {"input": {"delegate": OTHER.account_id, "role": "WRITER", "opts": {"path": "/notes", "label": "editor"}}},
    ),
    "agent capability": (
        blobs.capability(KEY, delegate=OTHER.account_id, ts=TS, role="AGENT"),
        {"kind": "capability", "ts": TS, "input": {"delegate": OTHER.account_id, "role": "AGENT"}},
    ),
    "genesis with ops at a real ts": (
        blobs.sign_blob(KEY, {"type": "Change", "ts": TS, "body": {"ops": OPS[1:2], "opCount": 1}}),
        None,
    ),
    "contact": (
        blobs.sign_blob(
            KEY, {"type": "Contact", "ts": TS, "subject": OTHER.principal, "name": "Bo", "subscribe": {"site": True}}
        ),
        None,
    ),
}


def _client_command(name: str, command: dict[str, Any]) -> dict[str, Any]:
    """The oracle command for a case: `input_<key>` entries folded into `input` (kept apart only to fit lines)."""
    out: dict[str, Any] = {"op": "make", "seed": KEY.seed.hex()}
    extra = {key.removeprefix("input_"): value for key, value in command.items() if key.startswith("input_")}
    out |= {key: value for key, value in command.items() if not key.startswith("input_")}
    if extra:
        out["input"] = {**out.get("input", {}), **extra}
    return out


def _run_oracle(commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return run_seed_oracle(commands)


def _raw_sign(key: KeyPair, value: dict[str, Any]) -> bytes:
    """Sign any map the way Seed signs, with none of `sign_blob`'s checks: for building blobs that must be refused."""
    value = {**value, "signer": key.principal, "sig": bytes(64)}
    value["sig"] = key.sign(encode(value))
    return encode(value)


def _tampered_text(blob: Blob) -> bytes:
    """The blob with one character of a string changed: still valid DAG-CBOR, no longer what was signed."""
    position = blob.data.index(b"Plan")
    return blob.data[:position] + b"Flan" + blob.data[position + 4 :]


TAMPERED = _tampered_text(SECOND)
FORGED_SIG = _raw_sign(OTHER, {**SECOND.value}).replace(OTHER.principal, KEY.principal)
