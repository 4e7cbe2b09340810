"""The ingest gate's authority rules beyond signatures: a Capability grants write only with a WRITER or AGENT role
(in the batch and held alike), and a Ref whose heads are neither in the batch nor held is refused naming the head,
so no push cut in two and no server withholding Changes can leave a document unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.node import Node
from mcp_harness.store.db import Database
from tests.hypermedia.test_sync_ingest import OPS, OWNER, STRANGER, TS, _document, _items


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(Database(tmp_path / "h.db"))


def _capability(role: str | None) -> blobs.Blob:
    value: dict[str, object] = {
        "type": "Capability",
        "delegate": blobs._principal(STRANGER.account_id, "Capability", "delegate"),  # pyright: ignore[reportPrivateUsage]
        "ts": TS,
        "label": "a share",
    }
    if role is not None:
        value["role"] = role
    return blobs.sign_blob(OWNER, value)


def test_a_capability_without_a_write_role_admits_no_writer(node: Node) -> None:
    roleless = _capability(None)
    intruder = _document(STRANGER, OWNER.account_id, path="/anything")
    with pytest.raises(BadRequest) as raised:
        node.ingest([(roleless.data, str(roleless.cid)), *_items(intruder)])
    assert "WRITER capability" in raised.value.message and node.ref(OWNER.account_id, "/anything") is None
    node.ingest([(roleless.data, str(roleless.cid))])  # held now: still grants nothing
    assert not node.store.has_capability(OWNER.account_id, STRANGER.account_id, "")
    assert not node.store.has_capability(OWNER.account_id, STRANGER.account_id, "/anything")
    with pytest.raises(BadRequest):
        node.ingest(_items(intruder))
    writer = _capability("WRITER")
    node.ingest([(writer.data, str(writer.cid)), *_items(intruder)])  # a WRITER one does, with no path: anywhere
    assert node.store.has_capability(OWNER.account_id, STRANGER.account_id, "/anything")
    assert node.ref(OWNER.account_id, "/anything") is not None


def test_a_ref_whose_heads_are_not_held_is_refused_naming_the_head(node: Node) -> None:
    genesis, change, ref = _document(OWNER, OWNER.account_id)
    with pytest.raises(BadRequest) as raised:
        node.ingest(_items([genesis, ref]))
    message = raised.value.message
    assert str(ref.cid) in message and str(change.cid) in message and "neither in this batch nor held" in message
    assert node.store.data(str(genesis.cid)) is None  # all or none
    node.ingest(_items([genesis, change]))  # the Changes first, in a batch of their own
    assert node.ingest(_items([ref])) == [str(ref.cid)]
    assert node.document(OWNER.account_id, "/doc").state.tree[0].block.text == "hi"


def test_a_newer_ref_whose_change_is_withheld_leaves_the_held_version_readable(node: Node) -> None:
    genesis, change, ref = _document(OWNER, OWNER.account_id)
    node.ingest(_items([genesis, change, ref]))
    edit = [{"type": "ReplaceBlock", "block": {**OPS[0]["block"], "text": "v2"}}]
    newer = blobs.change(OWNER, genesis=genesis.cid, deps=[change.cid], depth=2, ops=edit, ts=TS + 10)
    newer_ref = blobs.ref(
        OWNER, space=OWNER.account_id, path="/doc", genesis=genesis.cid, heads=[newer.cid], generation=TS, ts=TS + 10
    )
    with pytest.raises(BadRequest) as raised:
        node.ingest(_items([newer_ref]))
    assert str(newer.cid) in raised.value.message
    assert node.document(OWNER.account_id, "/doc").state.tree[0].block.text == "hi"
    node.ingest(_items([newer, newer_ref]))
    assert node.document(OWNER.account_id, "/doc").state.tree[0].block.text == "v2"
