"""Signed Seed blobs, checked against the official Seed client (`@seed-hypermedia/client`, tests/js/seed_oracle.mjs).

For every builder the client also has, the client builds the same blob from the same seed and inputs and the bytes
must be identical. Every blob built here must verify in the client under the same CID, and every blob the client
builds must pass `verify_blob`. Then `verify_blob` must refuse each kind of bad blob with a message naming the type
and the field.

The client runs once per module with every command in one batch. It needs Node.js and `tests/js/node_modules`,
which `make test` installs; without them these tests fail rather than skip.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob, verify_blob
from mcp_harness.hypermedia.cbor import decode, encode
from mcp_harness.hypermedia.cid import (
    CID,
    DAG_CBOR,
    RAW,
    _base58btc_decode,  # pyright: ignore[reportPrivateUsage]
    cid_of,
)
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


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict[str, Any]]:
    """The client's answers, keyed `make:<case>`, `verify:<case>`, `record-id`, and so on."""
    keyed: list[tuple[str, dict[str, Any]]] = [("account", {"op": "account", "seed": VECTOR_SEED.hex()})]
    for name, (blob, command) in CASES.items():
        keyed.append((f"verify:{name}", {"op": "verify", "hex": blob.data.hex(), "cid": str(blob.cid)}))
        if command is not None:
            keyed.append((f"make:{name}", _client_command(name, command)))
    keyed += [
        ("record-id", {"op": "recordId", "hex": ROOT_COMMENT.data.hex()}),
        ("verify:tampered", {"op": "verify", "hex": TAMPERED.hex()}),
        ("verify:forged", {"op": "verify", "hex": FORGED_SIG.hex()}),
    ]
    return dict(zip([key for key, _ in keyed], _run_oracle([command for _, command in keyed]), strict=True))


BUILT_BY_CLIENT = [name for name, (_, command) in CASES.items() if command is not None]


def test_the_vector_seed_gives_the_spec_account_here_and_in_the_client(oracle: dict[str, dict[str, Any]]) -> None:
    assert KEY.account_id == VECTOR_ACCOUNT
    assert oracle["account"] == {"account": VECTOR_ACCOUNT}


def test_the_oracle_refuses_what_it_should(oracle: dict[str, dict[str, Any]]) -> None:
    # Without this, an oracle that said yes to everything would pass every test below.
    assert oracle["verify:tampered"]["ok"] is False
    assert oracle["verify:forged"]["ok"] is False


@pytest.mark.parametrize("name", BUILT_BY_CLIENT)
def test_blobs_are_byte_identical_to_the_clients_builders(oracle: dict[str, dict[str, Any]], name: str) -> None:
    answer = oracle[f"make:{name}"]
    assert "error" not in answer, answer
    blob = CASES[name][0]
    assert decode(bytes.fromhex(answer["hex"])) == blob.value
    assert answer["hex"] == blob.data.hex()
    assert answer["cid"] == str(blob.cid)


@pytest.mark.parametrize("name", list(CASES))
def test_every_blob_verifies_in_the_client_under_the_same_cid(oracle: dict[str, dict[str, Any]], name: str) -> None:
    blob = CASES[name][0]
    assert oracle[f"verify:{name}"] == {"ok": True, "cid": str(blob.cid), "type": blob.type, "cidAccepted": True}


@pytest.mark.parametrize("name", BUILT_BY_CLIENT)
def test_the_clients_blobs_pass_verify_blob(oracle: dict[str, dict[str, Any]], name: str) -> None:
    answer = oracle[f"make:{name}"]
    assert answer["ok"] is True  # the client accepts its own blob, so a refusal below would be ours
    blob = verify_blob(bytes.fromhex(answer["hex"]), CID.parse(answer["cid"]))
    assert str(blob.cid) == answer["cid"]


@pytest.mark.parametrize("name", list(CASES))
def test_verify_blob_round_trips_every_blob(name: str) -> None:
    blob = CASES[name][0]
    assert verify_blob(blob.data) == blob
    assert verify_blob(blob.data, blob.cid) == blob


def test_a_comment_tsid_matches_the_clients_record_id(oracle: dict[str, dict[str, Any]]) -> None:
    assert oracle["record-id"] == {"id": f"{KEY.account_id}/{COMMENT_TSID}"}


def test_tsid_is_a_timestamp_and_a_hash_prefix_in_base58btc() -> None:
    data = b"some blob"
    text = tsid(TS, data)
    assert text.startswith("z") and 14 <= len(text) <= 15
    raw = _base58btc_decode(text[1:])
    assert raw == TS.to_bytes(6, "big") + hashlib.sha256(data).digest()[:4]
    assert tsid(0, data) != tsid(1, data)
    for bad in (-1, 2**48):
        with pytest.raises(BadRequest):
            tsid(bad, data)


def test_blob_properties_name_type_signer_time_and_author() -> None:
    assert (SECOND.type, SECOND.signer, SECOND.ts, SECOND.author) == ("Change", KEY.principal, TS + 2, VECTOR_ACCOUNT)
    assert SECOND.cid == cid_of(SECOND.data)
    assert SECOND.cid.codec == DAG_CBOR
    assert str(SECOND.cid).startswith("bafyrei")


def test_genesis_is_exactly_type_signer_sig_and_ts_zero() -> None:
    assert set(GENESIS.value) == {"type", "signer", "sig", "ts"}
    assert GENESIS.ts == 0
    assert blobs.genesis_change(KEY) == GENESIS


def test_change_sorts_deps_by_binary_cid_and_counts_ops() -> None:
    assert SECOND.value["deps"] == sorted(DEPS, key=CID.to_bytes)
    assert SECOND.value["body"]["opCount"] == len(OPS)


def test_sign_blob_drops_the_fields_seed_omits_when_empty() -> None:
    profile = blobs.sign_blob(KEY, {"type": "Profile", "ts": TS, "name": "Ada", "avatar": None, "description": ""})
    assert set(profile.value) == {"type", "signer", "sig", "ts", "name"}
    ref = blobs.ref(KEY, space=KEY.account_id, path="/a", genesis=GENESIS.cid, heads=[], generation=0, ts=TS)
    assert set(ref.value) == {"type", "signer", "sig", "ts", "path", "genesisBlob", "heads"}
    assert ref.value["heads"] == []
    genesis = blobs.sign_blob(KEY, {"type": "Change", "ts": 0, "deps": [], "depth": 0, "body": {"ops": []}})
    assert genesis == GENESIS


def test_blob_value_is_what_decoding_the_bytes_gives() -> None:
    block = {"id": "b", "type": "Image", "width": 2.0, "ratio": 0.5, "tags": ("x", "y")}
    unsigned = {"type": "Change", "ts": TS, "body": {"ops": ({"type": "ReplaceBlock", "block": block},), "opCount": 1}}
    blob = blobs.sign_blob(KEY, unsigned)
    assert blob.value == decode(blob.data)
    written = blob.value["body"]["ops"][0]["block"]
    assert written == {"id": "b", "type": "Image", "width": 2, "ratio": 0.5, "tags": ["x", "y"]}
    assert type(written["width"]) is int
    blob.value["body"]["ops"].clear()  # the Blob owns its copy: the caller's map is untouched
    assert unsigned["body"]["ops"]


def test_the_signature_lands_where_a_second_encoding_would_put_it() -> None:
    for blob, _ in CASES.values():
        assert encode(blob.value) == blob.data
    assert "id" in CASES["comment edit"][0].value  # a key that sorts before 'sig', besides 'ts'


def test_reply_parent_equal_to_the_thread_root_is_left_out() -> None:
    reply = blobs.comment(
        OTHER,
        space=KEY.account_id,
        path="/notes",
        version=HEADS,
        body=BODY,
        ts=TS,
        thread_root=ROOT_COMMENT.cid,
        reply_parent=ROOT_COMMENT.cid,
    )
    assert reply.value["threadRoot"] == ROOT_COMMENT.cid
    assert "replyParent" not in reply.value


def test_now_ms_is_whole_milliseconds_now() -> None:
    before = time.time_ns() // 1_000_000
    assert before <= blobs.now_ms() <= time.time_ns() // 1_000_000


# --- refusals -------------------------------------------------------------------------------------------------------


def _refused(data: bytes, cid: CID | None = None) -> str:
    with pytest.raises(BadRequest) as raised:
        verify_blob(data, cid)
    return raised.value.message


def test_a_tampered_blob_is_refused_naming_the_signature() -> None:
    message = _refused(TAMPERED)
    assert "Change" in message and "'sig'" in message and VECTOR_ACCOUNT in message


def test_a_signature_by_another_key_is_refused() -> None:
    message = _refused(FORGED_SIG)
    assert "'sig'" in message


def test_a_blob_that_does_not_hash_to_its_cid_is_refused() -> None:
    message = _refused(SECOND.data, FIRST.cid)
    assert str(FIRST.cid) in message


def test_a_blake2b_cid_is_accepted_as_the_go_daemon_names_blobs() -> None:
    digest = hashlib.blake2b(SECOND.data, digest_size=32).digest()
    cid = CID(1, DAG_CBOR, b"\xa0\xe4\x02\x20" + digest)  # varint 0xb220, length 32
    assert str(cid).startswith("bafy2bza")
    assert verify_blob(SECOND.data, cid).cid == cid
    wrong = CID(1, DAG_CBOR, b"\xa0\xe4\x02\x20" + bytes(32))
    assert str(wrong) in _refused(SECOND.data, wrong)


@pytest.mark.parametrize(
    "cid",
    [
        CID(1, DAG_CBOR, b"\x13\x40" + hashlib.sha512(SECOND.data).digest()),  # sha2-512
        cid_of(SECOND.data, RAW),
    ],
)
def test_cids_of_other_hashes_or_codecs_are_refused(cid: CID) -> None:
    assert "expected" in _refused(SECOND.data, cid)


@pytest.mark.parametrize(
    "data",
    [b"", b"\xa1", SECOND.data + b"\x00", encode([1, 2]), encode("Change")],
)
def test_bytes_that_are_not_one_dag_cbor_map_are_refused(data: bytes) -> None:
    assert "DAG-CBOR" in _refused(data) or "map" in _refused(data)


def test_non_canonical_bytes_are_refused() -> None:
    # The same map with its first two keys swapped: it decodes, but its CID and signature are over other bytes.
    data = GENESIS.data
    assert data[1:4] == b"bts"  # a4, then "ts" (2 chars) sorts first
    ts_entry = data[1:5]  # 62 74 73 00
    rest = data[5:]
    sig_entry_length = 1 + 3 + 2 + 64
    swapped = data[:1] + rest[:sig_entry_length] + ts_entry + rest[sig_entry_length:]
    assert decode(swapped) == GENESIS.value
    assert "canonical" in _refused(swapped)


BlobMap = dict[str, Any]
_DROP: Any = object()
"""Passed to `_with` for a field to leave out."""
_BASE: dict[str, BlobMap] = {
    "Change": {**SECOND.value},
    "Ref": {**CASES["ref"][0].value},
    "Comment": {**ROOT_COMMENT.value},
    "Profile": {**CASES["profile"][0].value},
    "Capability": {**CAPABILITY.value},
    "Contact": {**CASES["contact"][0].value},
}


def _with(blob_type: str, **changes: Any) -> BlobMap:
    """A valid blob map of `blob_type` (signature aside) with `changes` applied."""
    value = {**_BASE[blob_type], **changes}
    return {key: item for key, item in value.items() if item is not _DROP}


# (case id, blob map, field the message must name). Each is signed properly, so only the rule can refuse it.
INVALID: list[tuple[str, BlobMap, str]] = [
    ("unknown type", _with("Profile", type="Story"), "type"),
    ("no type", _with("Profile", type=_DROP), "type"),
    ("unknown Change field", _with("Change", extra=1), "extra"),
    ("unknown Ref field", _with("Ref", title="x"), "title"),
    ("unknown Profile field", _with("Profile", icon="ipfs://x"), "icon"),
    ("unknown Capability field", _with("Capability", expires=5), "expires"),
    ("unknown Comment field", _with("Comment", reactions=[]), "reactions"),
    ("negative ts", _with("Profile", ts=-1), "ts"),
    ("float ts", _with("Profile", ts=1.5), "ts"),
    ("string ts", _with("Profile", ts="1"), "ts"),
    ("empty deps", _with("Change", deps=[]), "deps"),
    ("zero depth", _with("Change", depth=0), "depth"),
    ("genesis without deps", _with("Change", deps=_DROP), "genesis/deps/depth"),
    ("deps without genesis", _with("Change", genesis=_DROP), "genesis/deps/depth"),
    ("deps without depth", _with("Change", depth=_DROP), "genesis/deps/depth"),
    ("deps not CIDs", _with("Change", deps=["bafy"]), "deps"),
    ("body not a map", _with("Change", body=[1]), "body"),
    ("unknown body field", _with("Change", body={"ops": OPS, "opCount": 5, "x": 1}), "body.x"),
    ("unknown op", _with("Change", body={"ops": [{"type": "Rewrite"}], "opCount": 1}), "body.ops[0].type"),
    ("op with extra key", _with("Change", body={"ops": [{**OPS[3], "x": 1}], "opCount": 1}), "body.ops[0].x"),
    (
        "block without id",
        _with("Change", body={"ops": [{"type": "ReplaceBlock", "block": {}}], "opCount": 1}),
        "body.ops[0].block",
    ),
    (
        "unsafe integer attribute",
        _with("Change", body={"ops": [{"type": "SetAttributes", "attrs": [{"key": ["n"], "value": 2**60}]}]}),
        "body.ops[0].attrs[0].value",
    ),
    ("ref without genesis", _with("Ref", genesisBlob=_DROP), "genesisBlob"),
    ("ref without heads", _with("Ref", heads=_DROP), "heads"),
    ("ref path without slash", _with("Ref", path="notes"), "path"),
    ("ref path with trailing slash", _with("Ref", path="/notes/"), "path"),
    ("ref path with a quote", _with("Ref", path='/no"tes'), "path"),
    ("ref path with a control character", _with("Ref", path="/no\ntes"), "path"),
    ("ref with empty path field", _with("Ref", path=""), "path"),
    ("home tombstone", _with("Ref", path=_DROP, heads=[]), "heads"),
    ("home redirect", _with("Ref", path=_DROP, redirect={"path": "/x"}), "redirect"),
    ("empty redirect", _with("Ref", heads=[], redirect={}), "redirect"),
    ("redirect with unknown key", _with("Ref", heads=[], redirect={"path": "/x", "to": 1}), "redirect.to"),
    ("private ref with nested path", _with("Ref", path="/a/b", visibility="Private"), "path"),
    ("unknown visibility", _with("Ref", visibility="Secret"), "visibility"),
    ("space not a principal", _with("Ref", space=b"\x01" * 34), "space"),
    ("space as a string", _with("Ref", space=VECTOR_ACCOUNT), "space"),
    ("profile without name", _with("Profile", name=_DROP), "name"),
    ("profile with empty name", _with("Profile", name=""), "name"),
    ("avatar not ipfs", _with("Profile", avatar="https://example.com/a.png"), "avatar"),
    ("avatar not a cid", _with("Profile", avatar="ipfs://nope"), "avatar"),
    ("long description", _with("Profile", description="x" * 512), "description"),
    ("alias with a name", _with("Profile", alias=OTHER.principal), "name"),
    ("capability without delegate", _with("Capability", delegate=_DROP), "delegate"),
    ("unknown role", _with("Capability", role="OWNER"), "role"),
    ("agent with a path", _with("Capability", role="AGENT"), "path"),
    ("label with spaces around", _with("Capability", label=" editor"), "label"),
    ("long label", _with("Capability", label="x" * 513), "label"),
    ("comment without body", _with("Comment", body=_DROP), "body"),
    ("comment body not a list", _with("Comment", body={}), "body"),
    ("comment child not a map", _with("Comment", body=[{"children": [1]}]), "body[0].children[0]"),
    ("reply parent without root", _with("Comment", replyParent=ROOT_COMMENT.cid), "threadRoot"),
    ("comment version not CIDs", _with("Comment", version=[VERSION]), "version"),
    ("comment bad path", _with("Comment", path="notes"), "path"),
    ("contact long name", _with("Contact", name="x" * 257), "name"),
    ("contact subscribe false", _with("Contact", subscribe={"site": False, "profile": True}), "subscribe.site"),
]


@pytest.mark.parametrize(("case", "value", "field"), INVALID, ids=[case for case, _, _ in INVALID])
def test_verify_blob_refuses_blobs_that_break_a_rule(case: str, value: BlobMap, field: str) -> None:
    message = _refused(_raw_sign(KEY, value))
    assert f"'{field}'" in message, message
    assert "expected" in message
    blob_type = value.get("type")
    if blob_type in _BASE:
        assert message.startswith(f"{blob_type} blob"), message


@pytest.mark.parametrize(
    ("field", "value"),
    [("sig", bytes(63)), ("sig", "x"), ("signer", bytes(34)), ("signer", b"\x80\x24" + bytes(33)), ("signer", None)],
)
def test_a_malformed_signer_or_signature_is_refused(field: str, value: object) -> None:
    data = encode({**GENESIS.value, field: value})
    assert f"'{field}'" in _refused(data)


BUILDER_REFUSALS: list[tuple[str, Callable[[], Blob], str]] = [
    (
        "ref path",
        lambda: blobs.ref(
            KEY, space=KEY.account_id, path="notes", genesis=GENESIS.cid, heads=HEADS, generation=1, ts=1
        ),
        "path",
    ),
    (
        "ref space",
        lambda: blobs.ref(KEY, space="alice", path="/a", genesis=GENESIS.cid, heads=HEADS, generation=1, ts=1),
        "space",
    ),
    (
        "empty redirect",
        lambda: blobs.ref(
            KEY, space=KEY.account_id, path="/a", genesis=GENESIS.cid, heads=[], generation=1, ts=1, redirect={}
        ),
        "redirect",
    ),
    (
        "home tombstone",
        lambda: blobs.ref(KEY, space=KEY.account_id, path="", genesis=GENESIS.cid, heads=[], generation=1, ts=1),
        "heads",
    ),
    ("change without deps", lambda: blobs.change(KEY, genesis=GENESIS.cid, deps=[], depth=1, ops=OPS, ts=1), "deps"),
    ("change ts", lambda: blobs.change(KEY, genesis=GENESIS.cid, deps=HEADS, depth=1, ops=OPS, ts=-5), "ts"),
    ("profile name", lambda: blobs.profile(KEY, name="", ts=1), "name"),
    ("agent path", lambda: blobs.capability(KEY, delegate=OTHER.account_id, ts=1, role="AGENT", path="/a"), "path"),
    ("delegate", lambda: blobs.capability(KEY, delegate="z6Mkbad", ts=1), "delegate"),
    (
        "reply parent alone",
        lambda: blobs.comment(
            KEY, space=KEY.account_id, path="", version=HEADS, body=[], ts=1, reply_parent=ROOT_COMMENT.cid
        ),
        "threadRoot",
    ),
    (
        "unencodable value",
        lambda: blobs.comment(KEY, space=KEY.account_id, path="", version=HEADS, body=[{"x": {1}}], ts=1),
        "DAG-CBOR",
    ),
]


@pytest.mark.parametrize(("case", "build", "field"), BUILDER_REFUSALS, ids=[case for case, _, _ in BUILDER_REFUSALS])
def test_builders_refuse_blobs_seed_would_not_take(case: str, build: Callable[[], Blob], field: str) -> None:
    with pytest.raises(BadRequest) as raised:
        build()
    assert field in raised.value.message
