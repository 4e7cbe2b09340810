"""Signed Seed blobs, checked against the official Seed client (`@seed-hypermedia/client`, tests/js/seed_oracle.mjs).

For every builder the client also has, the client builds the same blob from the same seed and inputs and the bytes
must be identical. Every blob built here must verify in the client under the same CID, and every blob the client
builds must pass `verify_blob`. test_hm_blob_refusals.py then has `verify_blob` refuse each kind of bad blob.

The client runs once per module with every command in one batch. It needs Node.js and `tests/js/node_modules`,
which `make test` installs; without them these tests fail rather than skip.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import verify_blob
from mcp_harness.hypermedia.cbor import decode, encode
from mcp_harness.hypermedia.cid import (
    CID,
    DAG_CBOR,
    _base58btc_decode,  # pyright: ignore[reportPrivateUsage]
    cid_of,
)
from mcp_harness.hypermedia.ids import tsid
from tests.hypermedia.blob_cases import (
    BODY,
    CASES,
    COMMENT_TSID,
    DEPS,
    FORGED_SIG,
    GENESIS,
    HEADS,
    KEY,
    OPS,
    OTHER,
    ROOT_COMMENT,
    SECOND,
    TAMPERED,
    TS,
    VECTOR_ACCOUNT,
    VECTOR_SEED,
    _client_command,
    _run_oracle,
)


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


def test_reply_parent_equal_to_the_thread_root_is_written_as_the_client_writes_it() -> None:
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
    assert (
        reply.value["replyParent"] == ROOT_COMMENT.cid
    )  # createComment's bytes (tests/hypermedia/test_web_api_comments.py)


def test_now_ms_is_whole_milliseconds_now() -> None:
    before = time.time_ns() // 1_000_000
    assert before <= blobs.now_ms() <= time.time_ns() // 1_000_000
