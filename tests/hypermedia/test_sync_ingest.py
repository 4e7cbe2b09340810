"""`Node.ingest`, the one gate for blobs from elsewhere (issue 19 point 6): tampered blobs (a bad signature, a wrong
CID, a non-writer's Change or Ref) are refused naming the blob, nothing of the batch is stored; a capability (in
the batch or held) admits a writer; comments need none; per-blob and per-request caps; IPFS blocks hash-checked."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mcp_harness.errors import BadRequest, TooLarge
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.cid import CID, RAW
from mcp_harness.hypermedia.node import Node
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store.db import Database

OWNER = KeyPair.from_seed(bytes(range(32)))
STRANGER = KeyPair.from_seed(bytes(range(1, 33)))
TS = 1_764_500_000_000
OPS = [
    {"type": "ReplaceBlock", "block": {"id": "b1", "type": "Paragraph", "text": "hi", "annotations": []}},
    {"type": "MoveBlocks", "parent": "", "blocks": ["b1"]},
]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(Database(tmp_path / "h.db"), max_blob_bytes=4096, max_request_bytes=16_384)


def _document(key: KeyPair, space: str, path: str = "/doc", ts: int = TS) -> list[Blob]:
    genesis = blobs.genesis_change(OWNER)
    change = blobs.change(key, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=OPS, ts=ts)
    ref = blobs.ref(key, space=space, path=path, genesis=genesis.cid, heads=[change.cid], generation=ts, ts=ts)
    return [genesis, change, ref]


def _items(published: list[Blob]) -> list[tuple[bytes, str | None]]:
    return [(b.data, str(b.cid)) for b in published]


def _refused(node: Node, items: list[tuple[bytes, str | None]]) -> str:
    with pytest.raises(BadRequest) as raised:
        node.ingest(items)
    return raised.value.message


def test_an_owners_document_is_taken_whole(node: Node) -> None:
    stored = node.ingest(_items(_document(OWNER, OWNER.account_id)))
    assert len(stored) == 3
    assert node.document(OWNER.account_id, "/doc").state.tree[0].block.text == "hi"


def test_a_bad_signature_is_refused_naming_the_blob_and_nothing_is_stored(node: Node) -> None:
    genesis, change, ref = _document(OWNER, OWNER.account_id)
    forged = bytearray(change.data)
    forged[-5] ^= 0xFF  # inside the ops: the signature no longer covers these bytes
    message = _refused(node, [(genesis.data, str(genesis.cid)), (bytes(forged), None), (ref.data, str(ref.cid))])
    assert "#2" in message and "nothing of this batch stored" in message
    assert node.store.data(str(genesis.cid)) is None and node.ref(OWNER.account_id, "/doc") is None


def test_a_wrong_cid_is_refused_naming_it(node: Node) -> None:
    genesis, change, _ = _document(OWNER, OWNER.account_id)
    message = _refused(node, [(change.data, str(genesis.cid))])
    assert str(genesis.cid) in message and "do not hash" in message


def test_a_strangers_ref_and_change_in_anothers_space_are_refused(node: Node) -> None:
    intruder = _document(STRANGER, OWNER.account_id)
    message = _refused(node, _items(intruder))
    assert str(intruder[2].cid) in message and STRANGER.account_id in message and "capability" in message
    assert node.ref(OWNER.account_id, "/doc") is None


def test_a_strangers_change_without_a_ref_is_refused(node: Node) -> None:
    node.ingest(_items(_document(OWNER, OWNER.account_id)))
    genesis = blobs.genesis_change(OWNER)
    change = blobs.change(STRANGER, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=OPS, ts=TS + 5)
    message = _refused(node, [(change.data, str(change.cid))])
    assert str(change.cid) in message and "WRITER capability" in message
    assert node.store.data(str(change.cid)) is None


def test_a_capability_in_the_batch_or_held_admits_a_writer(node: Node) -> None:
    cap = blobs.capability(OWNER, delegate=STRANGER.account_id, ts=TS - 1, path="/doc")
    written = _document(STRANGER, OWNER.account_id)
    assert len(node.ingest([(cap.data, str(cap.cid)), *_items(written)])) == 4
    later = blobs.ref(
        STRANGER,
        space=OWNER.account_id,
        path="/doc/child",
        genesis=written[0].cid,
        heads=[written[1].cid],
        generation=TS + 9,
        ts=TS + 9,
    )
    assert node.ingest([(later.data, None)]) == [str(later.cid)]  # the capability is held now, and covers /doc/*
    elsewhere = blobs.ref(
        STRANGER,
        space=OWNER.account_id,
        path="/other",
        genesis=written[0].cid,
        heads=[written[1].cid],
        generation=1,
        ts=TS + 10,
    )
    assert "/other" in _refused(node, [(elsewhere.data, None)])


def test_comments_need_no_capability(node: Node) -> None:
    node.ingest(_items(_document(OWNER, OWNER.account_id)))
    document = node.document(OWNER.account_id, "/doc")
    comment = node.comment_blob(STRANGER, document, [{"id": "c1", "type": "Paragraph", "text": "nice"}])
    assert node.ingest([(comment.data, str(comment.cid))]) == [str(comment.cid)]
    assert node.comment_count(OWNER.account_id, "/doc") == 1


def test_size_caps_per_blob_and_per_request(node: Node) -> None:
    big = blobs.change(
        OWNER,
        genesis=blobs.genesis_change(OWNER).cid,
        deps=[blobs.genesis_change(OWNER).cid],
        depth=1,
        ops=[{**OPS[0], "block": {**OPS[0]["block"], "text": "x" * 5000}}],
        ts=TS,
    )
    with pytest.raises(TooLarge) as one:
        node.ingest([(big.data, str(big.cid))])
    assert str(big.cid) in one.value.message and "max_blob_bytes" in one.value.message
    genesis = blobs.genesis_change(OWNER)
    with pytest.raises(TooLarge) as many:
        node.ingest([(genesis.data, str(genesis.cid))] * 200)
    assert "max_request_bytes" in many.value.message
    assert node.store.data(str(genesis.cid)) is None


def test_ipfs_blocks_are_hash_checked_and_kept(node: Node) -> None:
    data = b"a picture"
    cid = CID(1, RAW, b"\x12\x20" + hashlib.sha256(data).digest())
    assert node.ingest([(data, str(cid))]) == [str(cid)]
    assert "does not hash" in _refused(node, [(b"other bytes", str(cid))])
