"""`verify_blob` refuses each kind of bad blob, and the builders each blob Seed would not take, with a message naming
the type and the field."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob, verify_blob
from mcp_harness.hypermedia.cbor import decode, encode
from mcp_harness.hypermedia.cid import CID, DAG_CBOR, RAW, cid_of
from tests.hypermedia.blob_cases import (
    CAPABILITY,
    CASES,
    FIRST,
    FORGED_SIG,
    GENESIS,
    HEADS,
    KEY,
    OPS,
    OTHER,
    ROOT_COMMENT,
    SECOND,
    TAMPERED,
    VECTOR_ACCOUNT,
    VERSION,
    _raw_sign,
)


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
