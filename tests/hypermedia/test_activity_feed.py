"""ListEvents over the feed (HYPERMEDIA §4): pages newest observed first with opaque tokens, every filter, the
refusal of each malformed parameter, and the backfill of a database that held blobs before the feed existed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.node import Node
from mcp_harness.identity.identities import Identity, create_identity, load_keypair
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store.db import Database
from tests.hypermedia.activity_kit import comment, contact, create, feed, kinds
from tests.store.conftest import database_before


def _world(harness: Harness) -> tuple[Identity, Identity, KeyPair, KeyPair]:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    ka, kb = load_keypair(harness, alice.name), load_keypair(harness, bob.name)
    node = harness.hypermedia
    create(node, ka, "/plan", "The plan.", name="Plan")
    create(node, ka, "/plan/step", "A step.", name="Step")
    create(node, kb, "/notes", f"About [the plan](hm://{alice.account_id}/plan).", name="Notes")
    comment(node, kb, alice.account_id, "/plan", f"Nice, [Alice](hm://{alice.account_id}).")
    node.publish([blobs.capability(ka, delegate=bob.account_id, ts=blobs.now_ms(), path="/plan")])
    node.publish([contact(ka, bob.account_id, "Bobby", blobs.now_ms())])
    return alice, bob, ka, kb


def test_pages_run_newest_first_with_tokens_until_the_last(harness: Harness) -> None:
    _, _, ka, _ = _world(harness)
    node = harness.hypermedia
    everything = feed(node)
    seen: list[str] = []
    token = ""
    while True:
        page = node.activity.list_events(pageSize=3, pageToken=token)
        assert page["totalEvents"] == len(everything) and len(page["events"]) <= 3
        seen += [e["feedEventId"] for e in page["events"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert seen == [e["feedEventId"] for e in everything] and len(set(seen)) == len(seen) == 10
    seqs = [e.seq for e in node.activity.after(0, 100)]
    assert [e.key for e in node.activity.after(0, 100)][::-1] == seen and seqs == sorted(seqs)
    # A token names a position, not a snapshot: what arrives later comes first on a new read, never mid-paging.
    first = node.activity.list_events(pageSize=2)
    create(node, ka, "/late", "Late.")
    rest = node.activity.list_events(pageSize=50, pageToken=first["nextPageToken"])
    assert [e["feedEventId"] for e in rest["events"]] == seen[2:]
    assert node.activity.list_events(pageSize=1)["events"][0]["docId"]["path"] == ["late"]


@pytest.mark.parametrize(
    ("asked", "given"), [(0, 1), (-4, 1), (2.7, 2), (51, 50), (10**9, 50), (float("inf"), 50), (float("-inf"), 1)]
)
def test_page_size_is_clamped_to_one_to_fifty(harness: Harness, asked: float, given: int) -> None:
    alice = create_identity(harness, "Alice")
    key = load_keypair(harness, alice.name)
    ts = blobs.now_ms()
    grants = [blobs.capability(key, delegate=alice.account_id, ts=ts + n, path=f"/p{n}") for n in range(52)]
    harness.hypermedia.publish(grants)
    page = harness.hypermedia.activity.list_events(pageSize=asked)
    assert len(page["events"]) == given and page["nextPageToken"]


def test_the_default_page_is_twenty(harness: Harness) -> None:
    alice = create_identity(harness, "Alice")
    key = load_keypair(harness, alice.name)
    ts = blobs.now_ms()
    harness.hypermedia.publish(
        [blobs.capability(key, delegate=alice.account_id, ts=ts + n, path=f"/p{n}") for n in range(25)]
    )
    page = harness.hypermedia.activity.list_events()
    assert len(page["events"]) == 20 and page["totalEvents"] == 26


def test_filters_by_author_type_and_resource(harness: Harness) -> None:
    alice, bob, _, _ = _world(harness)
    node = harness.hypermedia
    a, b = f"hm://{alice.account_id}", f"hm://{bob.account_id}"
    assert {e["author"]["id"]["uid"] for e in feed(node, authors=[bob.account_id])} == {bob.account_id}
    assert len(feed(node, authors=[alice.account_id, bob.account_id])) == 10
    assert kinds(feed(node, authors=[])) == kinds(feed(node))  # an empty list filters nothing, as on Seed
    assert kinds(feed(node, eventTypes=["comment", "capability"])) == ["capability", "comment"]
    # The daemon's own names select the same, case-insensitively; Profile and DagPB are accepted and yield nothing.
    assert kinds(feed(node, eventTypes=["Ref"])) == ["doc-update"] * 5
    assert [e["sourceType"] for e in feed(node, eventTypes=["doc/link"])] == ["doc/Link"]
    assert [e["sourceType"] for e in feed(node, eventTypes=["COMMENT/LINK", "citation"])] == [
        "comment/Link",
        "doc/Link",
    ]
    assert feed(node, eventTypes=["Profile", "DagPB"]) == []
    # A resource is compared canonically: version, fragment, view terms and a trailing slash fall away.
    plan = feed(node, resource=f"{a}/plan")
    assert kinds(plan) == ["capability", "comment", "citation", "doc-update"]
    assert plan[2]["sourceType"] == "doc/Link"  # a citation is found by what it cites, as the daemon does
    version = plan[3]["docId"]["version"]
    assert feed(node, resource=f"{a}/plan/?v={version}#blk") == plan == feed(node, resource=f"{a}/plan/:comments")
    # The account itself is cited by the comment's @mention; a prefix takes everything below.
    home = feed(node, resource=a)
    assert kinds(home) == ["citation", "doc-update"] and home[0]["sourceType"] == "comment/Link"
    assert len(feed(node, resource=f"{a}/plan*")) == len(plan) + 1
    assert kinds(feed(node, resource=f"{a}/plan/*")) == ["doc-update"]
    assert kinds(feed(node, resource=f"{b}*")) == ["contact", "doc-update", "doc-update"]
    both = node.activity.list_events(pageSize=50, authors=[bob.account_id], eventTypes=["citation"], resource=a)
    assert both["totalEvents"] == 1 and both["events"][0]["target"]["id"]["id"] == a


def test_current_account_names_its_contacts_and_anchors_trusted_only(harness: Harness) -> None:
    alice, bob, ka, _ = _world(harness)
    node = harness.hypermedia
    carol = KeyPair.generate()
    create(node, carol, "", "Carol's home.", name="Carol")
    bobs = [e for e in feed(node, currentAccount=alice.account_id) if e["author"]["id"]["uid"] == bob.account_id]
    assert {e["author"]["metadata"]["name"] for e in bobs} == {"Bobby"}  # Alice's name for him
    assert {e["author"]["metadata"]["name"] for e in feed(node, authors=[bob.account_id])} == {"Bob"}
    assert feed(node, authors=[carol.account_id])[0]["author"]["metadata"] == {"name": "Carol"}
    trusted = feed(node, trustedOnly=True, currentAccount=alice.account_id)
    assert {e["author"]["id"]["uid"] for e in trusted} == {alice.account_id, bob.account_id}
    # Alice drops Bob from her contacts (a tombstone of the same TSID): only she is trusted now.
    (added,) = feed(node, eventTypes=["contact"])
    tsid = added["contact"]["id"]["path"][0]
    node.publish([contact(ka, None, "", blobs.now_ms(), replaces=tsid)])
    trusted = feed(node, trustedOnly=True, currentAccount=alice.account_id)
    assert {e["author"]["id"]["uid"] for e in trusted} == {alice.account_id}
    assert feed(node, trustedOnly=True, currentAccount=alice.account_id, authors=[bob.account_id]) == []


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"pageSize": "10"}, "pageSize"),
        ({"pageSize": True}, "pageSize"),
        ({"pageToken": "not-a-token"}, "pageToken"),
        ({"pageToken": 7}, "pageToken"),
        ({"authors": "z6Mk"}, "authors"),
        ({"authors": ["nobody"]}, "authors[]"),
        ({"authors": ["z6Mk"] * 33}, "authors"),
        ({"eventTypes": ["comments"]}, "eventTypes[]"),
        ({"eventTypes": "comment"}, "eventTypes"),
        ({"resource": "https://example.com/x"}, "resource"),
        ({"resource": 3}, "resource"),
        ({"trustedOnly": "yes"}, "trustedOnly"),
        ({"trustedOnly": True}, "trustedOnly needs currentAccount"),
        ({"currentAccount": "alice"}, "currentAccount"),
        ({"order": "observed"}, "'order'"),
    ],
)
def test_each_malformed_parameter_is_refused_by_name(harness: Harness, params: dict[str, Any], named: str) -> None:
    with pytest.raises(BadRequest) as refused:
        harness.hypermedia.activity.list_events(**params)
    assert named in refused.value.message and refused.value.message.startswith("activity: ")


def _copy_hm_rows(source: Path, target: sqlite3.Connection) -> None:
    """Put a current database's hypermedia rows into an older one, as that version would have stored them."""
    target.execute("ATTACH DATABASE ? AS src", (str(source),))
    for table in (
        "hm_blobs",
        "hm_changes",
        "hm_refs",
        "hm_comments",
        "hm_capabilities",
        "hm_documents",
        "hm_path_counts",
    ):
        target.execute(f"INSERT INTO {table} SELECT * FROM src.{table}")
    target.execute("DETACH DATABASE src")


def _comparable(event: Any) -> tuple[Any, ...]:
    data = {k: v for k, v in event.data.items() if k != "eventAtMs"}
    return (event.type, event.author, event.resource, event.target, event.mentions, event.summary, data)


def test_an_older_database_is_backfilled_with_the_events_of_the_blobs_it_holds(
    harness: Harness, tmp_path: Path
) -> None:
    _world(harness)
    expected = {e.key: _comparable(e) for e in harness.hypermedia.activity.after(0, 100)}
    old = database_before(tmp_path / "old.db", "m014_hm_activity")
    _copy_hm_rows(harness.db.path, old)
    received = dict(old.execute("SELECT cid, received_at FROM hm_blobs").fetchall())
    old.close()
    db = Database(tmp_path / "old.db")
    try:
        node = Node(db)
        backfilled = node.activity.after(0, 100)
        assert {e.key: _comparable(e) for e in backfilled} == expected
        # Observed when the older version received each blob (not when the migration ran), and numbered so.
        assert all(e.observed_at == received[e.cid] for e in backfilled if e.key.startswith("blob-"))
        assert [e.observed_at for e in backfilled] == sorted(e.observed_at for e in backfilled)
        # And the feed goes on from there.
        create(node, KeyPair.generate(), "", "New.")
        assert node.activity.after(backfilled[-1].seq, 5)[0].type == "doc-update"
    finally:
        db.close()
