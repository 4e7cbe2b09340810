"""A publish travels whole (issue 19 point 2 against the gate's rules): the push never cuts one publish's signed
blobs across requests — by the row window or the byte cap — so a path-scoped writer's Change always arrives beside
the Ref that vouches for it; and `hm push`'s retry sends a set-aside blob back with its whole document. Node A
pushes straight into node B's `ingest` (what B's PublishBlobs runs), a refusal becoming the 400 B would answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_harness.config import HmServerSettings
from mcp_harness.errors import HarnessError
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.node import Node
from mcp_harness.hypermedia.sync.client import SeedHttpError
from mcp_harness.hypermedia.sync.collect import retry_refused
from mcp_harness.hypermedia.sync.push import Pusher, PushHook
from mcp_harness.store.db import Database
from mcp_harness.store.hm_push import PushQueue
from tests.hypermedia.test_sync_ingest import OPS, OWNER, STRANGER, TS

WRITER = STRANGER
SERVER = "http://b"


@dataclass
class Nodes:
    a_db: Database
    a: Node
    b: Node
    requests: list[list[str]]
    genesis: Blob
    head: Blob
    cap: Blob

    def pusher(self, **kw: int) -> Pusher:
        nodes = self

        class ToB:  # a SeedClient whose server is B's PublishBlobs
            base = SERVER

            def publish(self, items: Sequence[tuple[str | None, bytes]]) -> list[str]:
                nodes.requests.append([str(cid) for cid, _ in items])
                try:
                    return nodes.b.ingest([(data, cid) for cid, data in items])
                except HarnessError as e:
                    raise SeedHttpError(f"{SERVER}/api/PublishBlobs answered {e.status}: {e.message}", e.status) from e

        return Pusher(self.a_db, [HmServerSettings(url=SERVER)], lambda s: ToB(), **kw)  # pyright: ignore[reportArgumentType]

    def writer_edit(self, text: str, ts: int) -> list[Blob]:
        """The writer's publish on /a: a Change and its Ref, in one commit of A's."""
        ops = [{"type": "ReplaceBlock", "block": {**OPS[0]["block"], "text": text}}]
        depth = int(self.head.value["depth"]) + 1
        change = blobs.change(WRITER, genesis=self.genesis.cid, deps=[self.head.cid], depth=depth, ops=ops, ts=ts)
        ref = blobs.ref(
            WRITER,
            space=OWNER.account_id,
            path="/a",
            genesis=self.genesis.cid,
            heads=[change.cid],
            generation=TS,
            ts=ts,
        )
        self.a.publish([change, ref])
        self.head = change
        return [change, ref]


@pytest.fixture
def nodes(tmp_path: Path) -> Nodes:
    a_db = Database(tmp_path / "a.db")
    a, b = Node(a_db), Node(Database(tmp_path / "b.db"))
    genesis = blobs.genesis_change(OWNER)
    cap = blobs.capability(OWNER, delegate=WRITER.account_id, ts=TS, path="/a")
    base = blobs.change(OWNER, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=OPS, ts=TS)
    ref = blobs.ref(
        OWNER, space=OWNER.account_id, path="/a", genesis=genesis.cid, heads=[base.cid], generation=TS, ts=TS
    )
    a.ingest([(x.data, str(x.cid)) for x in (genesis, cap, base, ref)])
    b.ingest([(x.data, str(x.cid)) for x in (genesis, base, ref)])  # B lacks only the capability, for now
    a.publish_hooks.append(PushHook(a_db, [HmServerSettings(url=SERVER)], lambda: None))
    return Nodes(a_db, a, b, [], genesis, base, cap)


def _text(node: Node) -> str:
    return node.document(OWNER.account_id, "/a").state.tree[0].block.text


def test_a_writers_publish_behind_a_backlog_is_not_cut_by_the_row_window(nodes: Nodes) -> None:
    nodes.b.ingest([(nodes.cap.data, str(nodes.cap.cid))])
    for i in range(199):  # a backlog: 199 owed blobs, so a 200-row window would end between Change and Ref
        nodes.a.publish([blobs.sign_blob(OWNER, {"type": "Profile", "name": f"n{i}", "ts": TS + 1 + i})])
    change, ref = nodes.writer_edit("the writer's edit", TS + 500)
    (report,) = nodes.pusher(batch=200).push_once(force=True)
    assert report.refused == 0 and report.delivered == 201 and PushQueue(nodes.a_db).backlog() == []
    assert [str(change.cid) in r for r in nodes.requests] == [str(ref.cid) in r for r in nodes.requests]
    assert _text(nodes.b) == "the writer's edit"


def test_a_writers_publishes_are_not_cut_by_the_byte_cap(nodes: Nodes) -> None:
    nodes.b.ingest([(nodes.cap.data, str(nodes.cap.cid))])
    edits = [nodes.writer_edit(f"edit {i}", TS + 10 + i) for i in range(3)]
    one = sum(len(b.data) for b in edits[0])
    (report,) = nodes.pusher(max_request_bytes=one + 40).push_once(force=True)  # one publish per request
    assert report.refused == 0 and report.delivered == 6
    assert nodes.requests == [[str(b.cid) for b in edit] for edit in edits]
    assert _text(nodes.b) == "edit 2"


def test_hm_push_sends_a_set_aside_blob_back_with_its_document(nodes: Nodes) -> None:
    change, ref = nodes.writer_edit("before the capability", TS + 20)
    (report,) = nodes.pusher().push_once(force=True)  # B holds no capability for the writer: both set aside
    queue = PushQueue(nodes.a_db)
    assert report.refused == 2 and queue.backlog()[0].refused == 2
    assert nodes.b.store.data(str(change.cid)) is None and nodes.b.store.data(str(ref.cid)) is None
    assert _text(nodes.b) == "hi"  # B's document is as it was, readable
    assert retry_refused(nodes.a_db, SERVER) == 2
    owed = {r.cid for r in queue.due(SERVER, 100, force=True)}
    assert {str(change.cid), str(ref.cid), str(nodes.cap.cid), str(nodes.genesis.cid)} <= owed  # with its vouchers
    assert len({r.group for r in queue.due(SERVER, 100, force=True)}) == 1
    (again,) = nodes.pusher().push_once(force=True)
    assert again.refused == 0 and queue.backlog() == []
    assert _text(nodes.b) == "before the capability"
