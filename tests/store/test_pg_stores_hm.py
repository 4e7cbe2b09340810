"""The embedded node's stores on both backends (`any_db`): blobs and their index (hypermedia.py), the materialized
documents and path counts (hm_documents.py), the activity feed and its ListEvents view (hm_activity*.py), and the
push queue (hm_push.py)."""

from __future__ import annotations

from typing import cast

import pytest

from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.node import Node
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store.db import Database
from mcp_harness.store.hm_push import KIND_BLOB, PushQueue
from mcp_harness.store.port import Store
from tests.hypermedia.activity_kit import comment, contact, create, feed, kinds
from tests.hypermedia.test_hm_materialized import assert_materialized_equals_replay
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the any_db fixture)

ALICE = KeyPair.from_seed(bytes(range(32)))
BOB = KeyPair.from_seed(bytes(range(1, 33)))


def node_on(db: Store) -> Node:
    return Node(cast(Database, db))  # Node is typed against SQLite's Database still (hypermedia/node.py)


@pytest.fixture
def node(any_db: Store) -> Node:
    node = node_on(any_db)
    space = ALICE.account_id
    create(node, ALICE, "/plan", "The plan.", name="Plan")
    create(node, ALICE, "/plan/step", "A step.", name="Step")
    create(node, ALICE, "/plan/other", "Another.", name="Other")
    create(node, BOB, "/notes", f"About [the plan](hm://{space}/plan).", name="Notes")
    comment(node, BOB, space, "/plan", f"Nice, [Alice](hm://{space}).")
    node.publish([blobs.capability(ALICE, delegate=BOB.account_id, ts=blobs.now_ms(), path="/plan")])
    node.publish([contact(ALICE, BOB.account_id, "Bobby", blobs.now_ms())])
    return node


def test_documents_are_indexed_materialized_and_counted(node: Node, any_db: Store) -> None:
    space = ALICE.account_id
    assert [d.path for d in node.children(space, "/plan")] == ["/plan/other", "/plan/step"]
    assert [d.path for d in node.children(space, "/plan", limit=1)] == ["/plan/other"]
    assert [d.path for d in node.children(space, "/plan", after="/plan/other")] == ["/plan/step"]
    assert (node.child_count(space, "/plan"), node.descendant_count(space, "")) == (2, 3)
    step = node.document(space, "/plan/step")
    node.publish(node.update(ALICE, step, [{"type": "SetAttributes", "attrs": [{"key": ["name"], "value": "S2"}]}]))
    node.publish([node.tombstone(ALICE, node.document(space, "/plan/other"))])  # the row is updated in place
    assert [d.path for d in node.children(space, "/plan")] == ["/plan/step"]
    assert node.child_count(space, "/plan") == 1
    assert node.store.has_capability(space, BOB.account_id, "/plan/step")
    assert not node.store.has_capability(space, BOB.account_id, "/notes")
    assert node.store.latest_ts(space) > 0
    [first] = node.comments_page(space, "/plan", after=None, limit=10)
    assert node.comment_count(space, "/plan") == 1 and node.comment(first.row.author, first.row.tsid).id == first.id
    assert assert_materialized_equals_replay(cast(Database, any_db)) == 3


def test_the_feed_pages_newest_first_filters_and_resolves_its_events(node: Node) -> None:
    events = feed(node)
    assert {"comment", "capability", "contact", "doc-update"} <= set(kinds(events))
    seqs = [e.seq for e in node.activity.after(0, 100)]
    assert seqs == sorted(seqs) and len(seqs) == len(events) and node.activity.latest_seq() == seqs[-1]
    first = node.activity.list_events(pageSize=2)
    rest = node.activity.list_events(pageSize=50, pageToken=first["nextPageToken"])
    assert [e["feedEventId"] for e in first["events"] + rest["events"]] == [e["feedEventId"] for e in events]
    by_bob = feed(node, authors=[BOB.account_id])
    assert by_bob and len(by_bob) < len(events)
    assert set(kinds(feed(node, eventTypes=["comment", "Capability"]))) == {"comment", "capability"}
    under_plan = feed(node, resource=f"hm://{ALICE.account_id}/plan*")
    assert under_plan and len(under_plan) < len(events)
    trusted = feed(node, trustedOnly=True, currentAccount=ALICE.account_id)  # Alice and her contact Bob
    assert len(trusted) == len(events)
    carol = KeyPair.from_seed(bytes(range(2, 34))).account_id
    assert feed(node, trustedOnly=True, currentAccount=ALICE.account_id, authors=[carol]) == []  # `1 = 0`


def test_the_push_queue_groups_retries_refuses_and_requeues(any_db: Store) -> None:
    queue = PushQueue(any_db)
    assert queue.enqueue(["s1", "s2"], [("c1", KIND_BLOB, 0), ("c2", KIND_BLOB, 1)], now=10) == 4
    assert queue.enqueue(["s1"], [("c1", KIND_BLOB, 0)], now=10) == 0  # owed already: INSERT OR IGNORE
    due = queue.due("s1", 1, now=10)
    assert [b.cid for b in due] == ["c1", "c2"]  # the whole group of the first row
    assert queue.due("s1", 10, now=5) == [] and len(queue.due("s1", 10, now=5, force=True)) == 2
    queue.failed("s1", [due[0].seq], "timeout", due_at=50)
    queue.refuse("s1", [due[1].seq], "too big")
    assert queue.next_due() == 10
    [s1, s2] = queue.backlog()
    assert (s1.server, s1.pending, s1.refused, s1.attempts, s1.last_error) == ("s1", 1, 1, 1, "too big")
    assert (s2.pending, s2.refused) == (2, 0)
    assert [b.cid for b in queue.refused_rows("s1")] == ["c2"]
    assert queue.requeue("s1", [due[1].seq], [("c2", KIND_BLOB, 1)]) == 1
    assert queue.refused_rows("s1") == []
    queue.refuse("s2", [b.seq for b in queue.due("s2", 10, now=10)], "no")
    assert queue.retry_refused("s2") == 2
    assert queue.pending_of(["c1", "c2"]) == {"s1": 2, "s2": 2}
    queue.delivered("s2", [b.seq for b in queue.due("s2", 10, force=True)])
    assert queue.pending_of(["c1", "c2"]) == {"s1": 2}
