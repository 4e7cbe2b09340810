"""The Hypermedia code's own reads on both backends (docs/postgres.md, "SQL outside `store/`"): the push's document
walk and set-aside retry (`sync/collect.py`) and its blob read (`sync/push.py`), with node A on each backend; and
the Seed web API's change walk and comment ids (`web_reads.py`) over a harness on each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_harness.config import HmServerSettings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
from mcp_harness.hypermedia.node import Node, comment_body
from mcp_harness.hypermedia.sync.collect import document_items, retry_refused
from mcp_harness.hypermedia.sync.push import PushHook
from mcp_harness.hypermedia.web_reads import SeedReads
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store.db import Database
from mcp_harness.store.hm_push import PushQueue
from mcp_harness.store.pg import PgDatabase
from mcp_harness.store.port import Store
from tests.hypermedia.test_sync_ingest import OPS, OWNER, TS
from tests.hypermedia.test_sync_push_groups import SERVER, WRITER, Nodes
from tests.store.harnesskit import any_harness_fixture  # noqa: F401  (the any_harness fixture)
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the any_db fixture)


def test_a_set_aside_publish_goes_back_with_its_document(any_db: Store, tmp_path: Path) -> None:
    a_db: Any = any_db  # Node and the sync code take the store port's SQLite face (docs/postgres.md, "Next" 1)
    # The sync code opens `IpfsBlockStore(db)`: a PgDatabase keeps its blocks under the data root `open_store`
    # names, given here as a serving harness's would be.
    if isinstance(any_db, PgDatabase):
        any_db.data_dir = tmp_path
    a, b = Node(a_db), Node(Database(tmp_path / "b.db"))
    genesis = blobs.genesis_change(OWNER)
    cap = blobs.capability(OWNER, delegate=WRITER.account_id, ts=TS, path="/a")
    base = blobs.change(OWNER, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=OPS, ts=TS)
    ref = blobs.ref(
        OWNER, space=OWNER.account_id, path="/a", genesis=genesis.cid, heads=[base.cid], generation=TS, ts=TS
    )
    a.ingest([(x.data, str(x.cid)) for x in (genesis, cap, base, ref)])
    b.ingest([(x.data, str(x.cid)) for x in (genesis, base, ref)])  # B lacks the capability: the edit is refused
    a.publish_hooks.append(PushHook(a_db, [HmServerSettings(url=SERVER)], lambda: None))
    nodes = Nodes(a_db, a, b, [], genesis, base, cap)
    change, edit_ref = nodes.writer_edit("before the capability", TS + 20)
    walked = [cid for cid, _kind, _rank in document_items(a_db, OWNER.account_id, "/a")]
    assert set(walked) == {str(x.cid) for x in (genesis, cap, base, ref, change, edit_ref)}
    (report,) = nodes.pusher().push_once(force=True)
    assert report.refused == 2 and retry_refused(a_db, SERVER) == 2
    queue = PushQueue(a_db)
    owed = {r.cid for r in queue.due(SERVER, 100, force=True)}
    assert {str(change.cid), str(edit_ref.cid), str(cap.cid), str(genesis.cid)} <= owed
    (again,) = nodes.pusher().push_once(force=True)
    assert again.refused == 0 and queue.backlog() == []
    assert b.document(OWNER.account_id, "/a").state.tree[0].block.text == "before the capability"


def _ops(markdown: str, name: str) -> list[dict[str, Any]]:
    return metadata_operations({"name": name}) + document_operations(parse_markdown(markdown).tree)


def test_the_seed_reads_walk_changes_and_name_comments(any_harness: Harness) -> None:
    node = any_harness.hypermedia
    key = KeyPair.generate()
    account = key.account_id
    node.publish(node.create(key, account, "", _ops("First.\n", "Home")))
    node.publish(node.update(key, node.document(account, ""), _ops("Second.\n", "Home")))
    node.publish([node.comment_blob(key, node.document(account, ""), comment_body(parse_markdown("Top.").tree))])
    (top,) = node.comments_page(account, "", after=None, limit=10)
    reply = comment_body(parse_markdown("A reply.").tree)
    node.publish([node.comment_blob(key, node.document(account, ""), reply, reply_to=top)])
    reads = SeedReads(node, any_harness.db)
    changes = reads.list_changes({"targetId": f"hm://{account}"})["changes"]
    assert len(changes) == 3 and changes[-1]["deps"] == []  # the two edits and the genesis, newest first
    comments = reads.list_comments({"targetId": f"hm://{account}"})["comments"]
    replies = [c for c in comments if c.get("replyParent")]
    assert len(comments) == 2 and len(replies) == 1
    assert replies[0]["replyParent"] == replies[0]["threadRoot"] == f"{top.row.author}/{top.row.tsid}"
