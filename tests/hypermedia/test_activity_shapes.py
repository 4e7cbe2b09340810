"""Our ListEvents responses parse in the official client's own types (`@seed-hypermedia/client` zod schemas): each
kind of event, a reply, a contact with subscriptions, names looked up and not."""

from __future__ import annotations

from mcp_harness.harness import Harness
from mcp_harness.hypermedia import blobs
from mcp_harness.identity.identities import create_identity, load_keypair
from tests.hypermedia.activity_kit import comment, create, kinds, principal
from tests.js_oracle import run_js


def test_every_kind_of_event_parses_as_the_clients_loaded_event(harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    ka, kb = load_keypair(harness, alice.name), load_keypair(harness, bob.name)
    node = harness.hypermedia
    a = f"hm://{alice.account_id}"
    create(node, ka, "/doc", f"<!-- id:blk -->\nSee <hm://{bob.account_id}>.")
    first = comment(node, kb, alice.account_id, "/doc", f"Quoting <{a}/doc#blk> for [Alice]({a}).")
    reply_to = node.comment(bob.account_id, _tsid(first))
    comment(node, ka, alice.account_id, "/doc", "Thanks!", reply_to)
    ts = blobs.now_ms()
    node.publish([blobs.capability(ka, delegate=bob.account_id, ts=ts, path="/doc", label="editor")])
    subscribed = {"type": "Contact", "subject": principal(bob.account_id), "name": "B", "subscribe": {"site": True}}
    node.publish([blobs.sign_blob(ka, {**subscribed, "ts": ts + 1})])
    response = node.activity.list_events(pageSize=50, currentAccount=alice.account_id)
    assert set(kinds(response["events"])) == {"comment", "doc-update", "capability", "contact", "citation"}
    replies = [e for e in response["events"] if e["type"] == "comment" and e["replyingComment"]]
    assert len(replies) == 1 and replies[0]["replyParentAuthor"]["metadata"]["name"] == "B"
    assert run_js("activity_oracle.mjs", {"response": response}) == {"errors": []}


def _tsid(blob: blobs.Blob) -> str:
    from mcp_harness.hypermedia.ids import tsid

    return tsid(blob.ts, blob.data)
