"""The activity feed records what each stored blob means: comments, document updates, capabilities, contacts and
citations found structurally in blocks — the same whether the node signed the blob or took it in from elsewhere —
and tells its listeners only once the blob is committed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.node import Node
from mcp_harness.identity.identities import create_identity, load_keypair
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store.db import Database
from tests.conftest import call
from tests.hypermedia.activity_kit import comment, contact, create, embed_block, feed, kinds
from tests.spaces.conftest import grant


def by_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


@pytest.mark.anyio
async def test_a_second_identity_publishing_through_write_records_each_event(client: Client, harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    grant(harness, alice, bob)
    a, b = f"hm://{alice.account_id}", f"hm://{bob.account_id}"
    await call(client, "write", {"address": f"{a}/plan", "content": "The plan.", "options": {"name": "Plan"}})
    node = harness.hypermedia
    start = node.activity.latest_seq()
    notes = await call(
        client,
        "write",
        {
            "address": f"{b}/notes",
            "content": f"See [the plan]({a}/plan).",
            "options": {"name": "Notes", "signer": "Bob"},
        },
    )
    said = await call(
        client,
        "write",
        {
            "address": f"{a}/plan",
            "content": f"Ping [Alice]({a}), <{a}> and @Bob.",
            "options": {"action": "comment", "signer": "Bob"},
        },
    )
    recorded = node.activity.after(start, 100)
    assert [(e.type, e.author) for e in recorded] == [
        ("doc-update", bob.account_id),
        ("citation", bob.account_id),
        ("comment", bob.account_id),
        ("citation", bob.account_id),
    ]
    update, cited, commented, mention = recorded
    assert update.resource == f"{b}/notes" and update.data["docId"]["version"] == notes["version"]
    assert update.data["document"]["metadata"] == {"name": "Notes"} and update.data["docId"]["latest"] is True
    # A document linking a document cites it; that is no @mention of anyone.
    assert (cited.resource, cited.target, cited.mentions) == (f"{b}/notes", f"{a}/plan", ())
    assert cited.data["sourceType"] == "doc/Link" and cited.data["citationType"] == "d"
    assert cited.key == f"mention-{cited.cid}--{a}/plan"
    # The comment @-mentions Alice (a link and an inline embed of her account: one citation); "@Bob" is only text.
    assert commented.key == f"blob-{commented.cid}" and commented.data["comment"]["id"] == said["id"][len("hm://") :]
    assert (commented.resource, commented.target, commented.mentions) == (f"{a}/plan", f"{a}/plan", (alice.account_id,))
    assert (mention.key, mention.resource, mention.target) == (f"mention-{commented.cid}--{a}", f"{a}/plan", a)
    assert mention.mentions == (alice.account_id,) and mention.data["citationType"] == "c"
    assert (
        mention.data["sourceType"] == "comment/Link"
        and mention.data["comment"]["id"] == commented.data["comment"]["id"]
    )
    assert commented.summary == f"comment by Bob on {a}/plan"
    assert mention.summary == f"mention by Bob of {a} in {a}/plan"
    # A profile is no feed event, but every event of its account is named by it from then on.
    await call(
        client, "write", {"address": b, "options": {"action": "profile.update", "name": "Robert", "signer": "Bob"}}
    )
    assert node.activity.latest_seq() == recorded[-1].seq
    assert node.activity.after(start, 1)[0].data["author"]["metadata"] == {"name": "Robert"}


def test_plain_text_names_and_ids_are_no_mention(harness: Harness) -> None:
    alice = create_identity(harness, "Alice")
    key = load_keypair(harness, alice.name)
    node = harness.hypermedia
    create(node, key, "/doc", "Body.")
    start = node.activity.latest_seq()
    comment(node, key, alice.account_id, "/doc", f"Hello @Alice, see hm://{alice.account_id} or `<hm://x>`.")
    (only,) = node.activity.after(start, 10)
    assert only.type == "comment" and only.mentions == ()
    assert "@Alice" in only.data["comment"]["content"][0]["block"]["text"]


def test_embeds_in_documents_are_citations_of_what_they_embed(harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    key = load_keypair(harness, alice.name)
    node = harness.hypermedia
    a, b = f"hm://{alice.account_id}", f"hm://{bob.account_id}"
    create(node, key, "/target", "<!-- id:blk -->\nQuoted.")
    start = node.activity.latest_seq()
    create(node, key, "/page", tree=(embed_block("e1", f"{a}/target#blk"),), name="Page")
    create(node, key, "/hello", f"Hi <{b}>, and <{b}/:profile> again.", name="Hello")
    events = node.activity.after(start, 20)
    assert kinds([e.data for e in events]) == ["doc-update", "citation", "doc-update", "citation"]
    block_embed, inline = events[1], events[3]
    assert block_embed.target == f"{a}/target" and block_embed.mentions == ()
    assert block_embed.data["sourceType"] == "doc/Embed" and block_embed.data["targetFragment"] == "blk"
    assert block_embed.data["id"] == f"{block_embed.cid}-blk"
    assert block_embed.data["source"]["id"]["blockRef"] == "e1" and block_embed.data["source"]["id"]["version"]
    assert block_embed.data["target"]["metadata"] == {"name": "Doc"}
    # An inline embed of an account (or of its profile) @-mentions it: one citation for both links.
    assert (inline.target, inline.mentions, inline.data["sourceType"]) == (b, (bob.account_id,), "doc/Embed")


def test_an_update_cites_only_what_its_new_change_links_and_a_move_cites_nothing_again(harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    key = load_keypair(harness, alice.name)
    node = harness.hypermedia
    b = f"hm://{bob.account_id}"
    create(node, key, "/doc", f"Hi <{b}>.")
    document = node.document(alice.account_id, "/doc")
    start = node.activity.latest_seq()
    ops = [{"type": "SetAttributes", "attrs": [{"key": ["name"], "value": "Renamed"}]}]
    node.publish(node.update(key, document, ops))
    node.publish(node.move(key, node.document(alice.account_id, "/doc"), "/moved"))
    events = node.activity.after(start, 20)
    # The update's change links nothing new; the move lands a new Ref on the same heads (its redirect is no update).
    assert [(e.type, e.resource) for e in events] == [
        ("doc-update", f"hm://{alice.account_id}/doc"),
        ("doc-update", f"hm://{alice.account_id}/moved"),
    ]
    assert events[1].data["document"]["metadata"] == {"name": "Renamed"}


def test_capabilities_and_contacts_record_what_seed_shows(harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    key = load_keypair(harness, alice.name)
    node = harness.hypermedia
    create(node, key, "/notes", "Notes.", name="Notes")
    start = node.activity.latest_seq()
    ts = blobs.now_ms()
    node.publish([blobs.capability(key, delegate=bob.account_id, ts=ts, path="/notes", label="editor")])
    node.publish([blobs.capability(key, delegate=bob.account_id, ts=ts + 1, role="AGENT")])  # Seed shows none
    added = contact(key, bob.account_id, "Bobby", ts + 2)
    node.publish([added, contact(key, None, "", ts + 3, replaces="zgone")])  # a tombstone is no event
    grant_event, contact_event = node.activity.after(start, 10)
    assert (grant_event.type, grant_event.resource) == ("capability", f"hm://{alice.account_id}/notes")
    capability = grant_event.data["capability"]
    assert capability["role"] == "writer" and capability["label"] == "editor"
    assert capability["grantId"]["id"] == f"hm://{alice.account_id}/notes"
    assert grant_event.data["delegates"] == [
        {"id": grant_event.data["delegates"][0]["id"], "metadata": {"name": "Bob"}}
    ]
    assert grant_event.data["target"]["metadata"] == {"name": "Notes"}
    assert (contact_event.type, contact_event.resource) == ("contact", f"hm://{bob.account_id}")
    assert contact_event.data["contact"]["name"] == "Bobby"
    assert contact_event.data["contact"]["subject"]["id"]["uid"] == bob.account_id
    assert contact_event.data["contact"]["id"]["path"] == [contact_event.data["contact"]["id"]["path"][0]]


def _blobs_signed_elsewhere(tmp_path: Path) -> tuple[list[blobs.Blob], list[dict[str, Any]]]:
    """Blobs two keys this harness does not hold sign on a node of their own, and the feed that node records."""
    carol, dave = KeyPair.generate(), KeyPair.generate()
    db = Database(tmp_path / "elsewhere.db")
    elsewhere = Node(db)
    out: list[blobs.Blob] = []
    made = elsewhere.create(carol, carol.account_id, "", [])
    made += elsewhere.create(dave, dave.account_id, "", [])
    elsewhere.publish(made)
    out += made
    doc = elsewhere.create(carol, carol.account_id, "/post", _ops(f"Thanks <hm://{dave.account_id}>."))
    elsewhere.publish(doc)
    out += doc
    post = elsewhere.document(carol.account_id, "/post")
    said = elsewhere.comment_blob(dave, post, _body(f"Yes [Carol](hm://{carol.account_id})"))
    ts = blobs.now_ms()
    extra = [said, blobs.capability(carol, delegate=dave.account_id, ts=ts), contact(carol, dave.account_id, "D", ts)]
    elsewhere.publish(extra)
    out += extra
    recorded = [_stable(e.data) for e in elsewhere.activity.after(0, 100)]
    db.close()
    return out, recorded


def _ops(markdown: str) -> list[dict[str, Any]]:
    from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown

    return metadata_operations({"name": "Post"}) + document_operations(parse_markdown(markdown).tree)


def _body(markdown: str) -> list[dict[str, Any]]:
    from mcp_harness.hypermedia.markdown import parse_markdown
    from mcp_harness.hypermedia.node import comment_body

    return comment_body(parse_markdown(markdown).tree)


def _stable(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "eventAtMs"}


def test_blobs_ingested_from_elsewhere_record_the_same_events_as_publishing_them(
    harness: Harness, tmp_path: Path
) -> None:
    signed, expected = _blobs_signed_elsewhere(tmp_path)
    node = harness.hypermedia
    node.ingest([(b.data, str(b.cid)) for b in signed])
    got = [_stable(e.data) for e in node.activity.after(0, 100)]
    assert got == expected
    assert kinds(got) == [
        "doc-update",
        "doc-update",
        "doc-update",
        "citation",
        "comment",
        "citation",
        "capability",
        "contact",
    ]
    # Ingesting them again records nothing twice.
    node.ingest([(b.data, str(b.cid)) for b in signed])
    assert len(feed(node)) == len(expected)


def test_listeners_are_told_after_the_commit_and_never_for_a_rollback(harness: Harness) -> None:
    alice = create_identity(harness, "Alice")
    key = load_keypair(harness, alice.name)
    node = harness.hypermedia
    committed: list[int] = []

    def count_committed() -> None:
        # Another connection sees only what is committed: the events must already be there when we are told.
        with sqlite3.connect(harness.db.path) as other:
            committed.append(other.execute("SELECT COUNT(*) FROM hm_activity").fetchone()[0])

    def broken() -> None:
        raise RuntimeError("a listener's own bug")

    node.on_activity(broken)
    node.on_activity(count_committed)
    before = node.activity.latest_seq()
    create(node, key, "/one", "One.")
    assert committed == [before + 1]
    # A batch inside a larger transaction is told about once that one commits.
    with harness.db.transaction():
        create(node, key, "/two", "Two.")
        assert committed == [before + 1]
    assert committed == [before + 1, before + 2]
    with pytest.raises(RuntimeError), harness.db.transaction():
        create(node, key, "/three", "Three.")
        raise RuntimeError("abandon the write")
    assert committed == [before + 1, before + 2] and node.activity.latest_seq() == before + 2
    # A profile (no event) and a blob already stored tell nobody.
    node.publish([node.profile_blob(key, "Alice")])
    node.publish(node.create(key, alice.account_id, "/four", [])[:1])  # the genesis, stored long ago
    assert committed == [before + 1, before + 2]


def test_a_reopened_database_keeps_the_feed_and_its_numbering(tmp_path: Path) -> None:
    first = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        alice = create_identity(first, "Alice")
        create(first.hypermedia, load_keypair(first, alice.name), "/doc", "Doc.")
        seq = first.hypermedia.activity.latest_seq()
    finally:
        first.close()
    again = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        assert again.hypermedia.activity.latest_seq() == seq
        assert again.hypermedia.activity.after(seq - 1, 5)[0].resource == f"hm://{alice.account_id}/doc"
    finally:
        again.close()
