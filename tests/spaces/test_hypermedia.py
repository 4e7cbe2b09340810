"""`write hm://` and `read hm://` through the MCP client, end to end on the embedded node.

Publish, update, comment, move, redirect, delete and fork; every read form back (markdown with block ids, json,
`?v=`, `#block[start:end]`, comments, `/:directory`, `/:attributes`, `/:profile`, `/:comments`); every refusal of the
reference; identities that publish their profile and home document. The blobs the node signed along the way are
checked by the official Seed client at the end (tests/js/seed_oracle.mjs).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from mcp_harness.hypermedia.blocks import Block, BlockNode
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations
from mcp_harness.identity.identities import Identity, create_identity, import_identity, load_keypair, update_identity
from mcp_harness.identity.keys import KeyPair
from tests.conftest import call, refused
from tests.js_oracle import verify_all_blobs
from tests.spaces.conftest import grant, ids_of

pytestmark = pytest.mark.anyio


DOC = """---
name: "Field notes"
summary: "What we saw"
---

# Birds

We saw **three** herons near the [river](https://example.org/river).

- one on a post
- two in the reeds

```python
print("heron")
```
"""


async def test_create_reads_back_as_markdown_with_block_ids_and_as_json(client: Client, alice: Identity) -> None:
    url = f"hm://{alice.account_id}/notes"
    made = await call(client, "write", {"address": url, "content": DOC})
    assert made["id"] == url and made["signer"] == alice.account_id and made["dryRun"] is False
    assert made["name"] == "Field notes" and made["version"].startswith("bafyrei")
    read = await call(client, "read", {"address": url})
    assert read["requestedId"] == url and read["id"] == url and read["version"] == made["version"]
    markdown = read["markdown"]
    assert "Field notes" in markdown.split("---")[1] and "# Birds" in markdown and "**three**" in markdown
    assert "[river](https://example.org/river)" in markdown and "```python" in markdown
    assert len(ids_of(markdown)) >= 5
    resource = await client.read_resource(url)
    assert resource.contents[0].text == markdown  # pyright: ignore[reportAttributeAccessIssue]
    as_json = await call(client, "read", {"address": url, "format": "json"})
    assert as_json["metadata"] == {"name": "Field notes", "summary": "What we saw"}
    heading = as_json["content"][0]
    assert heading["block"]["type"] == "Heading" and heading["block"]["text"] == "Birds"
    assert [c["block"]["type"] for c in heading["children"]][:1] == ["Paragraph"]


async def test_update_keeps_surviving_block_ids_and_old_versions_stay_readable(client: Client, alice: Identity) -> None:
    url = f"hm://{alice.account_id}/notes"
    first = await call(client, "write", {"address": url, "content": DOC})
    before = (await call(client, "read", {"address": url}))["markdown"]
    edited = before.replace("**three**", "**four**")
    second = await call(client, "write", {"address": url, "content": edited, "options": {"action": "update"}})
    assert second["version"] != first["version"]
    after = (await call(client, "read", {"address": url}))["markdown"]
    assert "**four**" in after and ids_of(after) == ids_of(before)
    # Without markers, the blocks that survive keep their ids too.
    bare = re.sub(r" ?<!-- id:[A-Za-z0-9_-]+ -->", "", edited).replace("two in the reeds", "two in the mud")
    await call(client, "write", {"address": url, "content": bare, "options": {"action": "update"}})
    third = (await call(client, "read", {"address": url}))["markdown"]
    assert ids_of(third)[0] == ids_of(before)[0] and "two in the mud" in third
    old = await call(client, "read", {"address": f"{url}?v={first['version']}"})
    assert "**three**" in old["markdown"] and old["version"] == first["version"]
    meta_only = await call(client, "write", {"address": url, "options": {"action": "update", "name": "Renamed"}})
    attrs = await call(client, "read", {"address": f"{url}/:attributes"})
    assert attrs["metadata"]["name"] == "Renamed" and attrs["version"] == meta_only["version"]
    assert "two in the mud" in (await call(client, "read", {"address": url}))["markdown"]


async def test_block_fragments_and_code_point_ranges(client: Client, alice: Identity) -> None:
    url = f"hm://{alice.account_id}/frag"
    await call(client, "write", {"address": url, "content": "Héllo wörld, here we are.", "options": {"name": "F"}})
    block_id = ids_of((await call(client, "read", {"address": url}))["markdown"])[0]
    one = await call(client, "read", {"address": f"{url}#{block_id}"})
    assert "Héllo wörld" in one["markdown"] and "name:" not in one["markdown"]
    part = await call(client, "read", {"address": f"{url}#{block_id}[6:11]", "format": "json"})
    assert part["content"][0]["block"]["text"] == "wörld"
    error = await refused(client, "read", {"address": f"{url}#nope"})
    assert error["status"] == 404 and "nope" in error["message"]


async def test_directory_lists_children_with_counts(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/projects", "content": "All projects.", "options": {"name": "P"}})
    await call(client, "write", {"address": f"{base}/projects/a", "content": "Alpha.", "options": {"name": "A"}})
    await call(client, "write", {"address": f"{base}/projects/a/x", "content": "Deep.", "options": {"name": "X"}})
    await call(
        client,
        "write",
        {
            "address": f"{base}/projects/b",
            "content": "Beta.",
            "options": {"metadata": {"name": "B", "summary": "the second"}},
        },
    )
    listing = await call(client, "read", {"address": f"{base}/projects/:directory"})
    entries = {e["path"]: e for e in listing["documents"]}
    assert set(entries) == {"/projects/a", "/projects/b"}
    assert entries["/projects/a"]["childrenCount"] == 1 and entries["/projects/b"]["childrenCount"] == 0
    assert entries["/projects/b"]["summary"] == "the second" and entries["/projects/a"]["summary"] == "Alpha."
    assert entries["/projects/a"]["name"] == "A" and entries["/projects/a"]["id"] == f"{base}/projects/a"
    assert entries["/projects/a"]["updateTime"].endswith("Z")


async def test_comments_replies_and_reading_them(client: Client, alice: Identity) -> None:
    url = f"hm://{alice.account_id}/notes"
    await call(client, "write", {"address": url, "content": DOC})
    first = await call(
        client, "write", {"address": url, "content": "Lovely *herons*.", "options": {"action": "comment"}}
    )
    assert first["id"].startswith(f"hm://{alice.account_id}/z") and first["target"] == url
    reply = await call(
        client,
        "write",
        {"address": url, "content": "Agreed.", "options": {"action": "comment", "replyTo": first["id"]}},
    )
    assert reply["replyTo"] == first["id"].removeprefix("hm://")
    read = await call(client, "read", {"address": first["id"]})
    assert read["markdown"] == "Lovely _herons_." and read["target"] == url and read["author"] == alice.account_id
    thread = await call(client, "read", {"address": f"{url}/:comments"})
    assert [c["id"] for c in thread["comments"]] == [first["id"], reply["id"]]
    assert thread["comments"][1]["replyParent"]


async def test_move_redirect_delete_and_fork(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/old", "content": "Moving soon.", "options": {"name": "Mover"}})
    moved = await call(client, "write", {"address": f"{base}/old", "options": {"action": "move", "toPath": "/new"}})
    assert moved["id"] == f"{base}/new"
    via_old = await call(client, "read", {"address": f"{base}/old"})
    assert via_old["id"] == f"{base}/new" and via_old["redirectedFrom"] == f"{base}/old"
    await call(client, "write", {"address": f"{base}/alias", "content": "temp", "options": {"name": "Alias"}})
    await call(client, "write", {"address": f"{base}/alias", "options": {"action": "redirect", "toUrl": f"{base}/new"}})
    assert (await call(client, "read", {"address": f"{base}/alias"}))["id"] == f"{base}/new"
    forked = await call(
        client, "write", {"address": f"{base}/copy", "options": {"action": "fork", "fromUrl": f"{base}/new"}}
    )
    assert forked["from"].startswith(f"{base}/new?v=")
    copy = await call(client, "read", {"address": f"{base}/copy"})
    assert "Moving soon." in copy["markdown"] and copy["name"] == "Mover"
    await call(client, "write", {"address": f"{base}/copy", "options": {"action": "delete"}})
    gone = await refused(client, "read", {"address": f"{base}/copy"})
    assert gone["status"] == 404 and "deleted" in gone["message"]
    # A deleted path can be created anew, and the new document wins.
    await call(client, "write", {"address": f"{base}/copy", "content": "Second life.", "options": {"name": "Again"}})
    assert "Second life." in (await call(client, "read", {"address": f"{base}/copy"}))["markdown"]


async def test_embeds_render_as_labels_with_the_embedded_content(
    client: Client, alice: Identity, harness: Harness
) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/quoted", "content": "Quoted words.", "options": {"name": "Q"}})
    await call(
        client,
        "write",
        {
            "address": f"{base}/host",
            "options": {"name": "Host"},
            "content": f"See <{base}/quoted> inline.\n\n![](https://x.y/i.png)\n",
        },
    )
    read = await call(client, "read", {"address": f"{base}/host"})
    assert f"See <{base}/quoted> inline." in read["markdown"]
    assert read["embeds"] == [{"link": f"{base}/quoted", "label": "Q"}]
    result = await client.call_tool("read", {"address": f"{base}/host"})
    assert f"- {base}/quoted — Q" in result.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
    # A block embed (as Seed's editor writes them) reads as a labelled quote holding the embedded content.
    node = harness.hypermedia
    key = load_keypair(harness, alice.name)
    embed = Block(id="emb1", type="Embed", link=f"{base}/quoted", attributes={"view": "Content"})
    ops = metadata_operations({"name": "Block host"}) + document_operations((BlockNode(embed),))
    node.publish(node.create(key, alice.account_id, "/blockhost", ops))
    quoted = (await call(client, "read", {"address": f"{base}/blockhost"}))["markdown"]
    assert "Embedded: Q" in quoted and "Quoted words." in quoted


async def test_dry_run_validates_and_publishes_nothing(client: Client, alice: Identity, harness: Harness) -> None:
    url = f"hm://{alice.account_id}/dry"
    before = harness.db.run(lambda db: _blob_count(db))
    result = await call(client, "write", {"address": url, "content": "x", "options": {"name": "D"}, "dryRun": True})
    assert result["dryRun"] is True and result["blobs"] and "Nothing was signed" in result["summary"]
    assert harness.db.run(lambda db: _blob_count(db)) == before
    assert (await refused(client, "read", {"address": url}))["status"] == 404
    error = await refused(client, "write", {"address": url, "content": "x", "dryRun": "yes"})
    assert error["status"] == 400 and "dryRun" in error["message"] and "boolean" in error["message"]


def _blob_count(db: Any) -> int:
    with db.reading() as conn:
        return conn.execute("SELECT COUNT(*) FROM hm_blobs").fetchone()[0]


async def test_every_refusal_names_the_problem(client: Client, alice: Identity, harness: Harness) -> None:
    base = f"hm://{alice.account_id}"
    unknown = await refused(
        client,
        "write",
        {"address": f"{base}/a", "content": "x", "options": {"name": "A", "title": "T", "colour": "red"}},
    )
    assert unknown["status"] == 400 and '"title", "colour"' in unknown["message"]
    assert "Supported options: action, signer, input, skipLinkCheck, name, metadata" in unknown["message"]
    assert "metadata.name" in unknown["message"] and "options.input" in unknown["message"]
    nameless = await refused(client, "write", {"address": f"{base}/a", "content": "no name here"})
    assert nameless["status"] == 400 and "needs a name" in nameless["message"]
    orphan = await refused(client, "write", {"address": f"{base}/x/y", "content": "y", "options": {"name": "Y"}})
    assert "parent" in orphan["message"]
    malformed = await refused(
        client, "write", {"address": f"{base}/a", "options": {"name": "A"}, "content": "[bad](hm://)"}
    )
    assert malformed["status"] == 400 and "malformed" in malformed["message"]
    missing = await refused(
        client, "write", {"address": f"{base}/a", "options": {"name": "A"}, "content": f"[gone]({base}/nowhere)"}
    )
    assert "skipLinkCheck" in missing["message"]
    await call(
        client,
        "write",
        {"address": f"{base}/a", "content": f"[gone]({base}/nowhere)", "options": {"name": "A", "skipLinkCheck": True}},
    )
    big = await refused(
        client, "write", {"address": f"{base}/big", "content": "x" * (256 * 1024 + 1), "options": {"name": "Big"}}
    )
    assert big["status"] == 413
    bad_action = await refused(client, "write", {"address": f"{base}/a", "options": {"action": "explode"}})
    assert "Unknown write action" in bad_action["message"]
    again = await refused(client, "write", {"address": f"{base}/a", "content": "z", "options": {"name": "A"}})
    assert again["status"] == 409 and "update" in again["message"]
    foreign = KeyPair.generate().account_id
    not_ours = await refused(
        client, "write", {"address": f"hm://{foreign}/p", "content": "z", "options": {"name": "P"}}
    )
    assert not_ours["status"] == 403 and "capability" in not_ours["message"]
    wrong_signer = await refused(
        client, "write", {"address": f"{base}/s", "content": "z", "options": {"name": "S", "signer": "Mallory"}}
    )
    assert "Alice" in wrong_signer["message"]
    grant(harness, alice, tools=["execute"])
    forbidden = await refused(client, "write", {"address": f"{base}/b", "content": "z", "options": {"name": "B"}})
    assert forbidden == {
        "code": "forbidden",
        "status": 403,
        "message": 'Publishing is not enabled for this agent. The owner can grant "Publish Seed content" in its tool '
        "settings.",
    }


async def test_signer_by_profile_name_and_from_path(client: Client, harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    grant(harness, alice, bob)
    await call(client, "write", {"address": "~/memory/post.md", "content": "---\ntitle: Post\n---\n\nHello."})
    made = await call(
        client, "write", {"address": f"hm://{bob.account_id}/post", "options": {"fromPath": "post.md", "signer": "Bob"}}
    )
    assert made["signer"] == bob.account_id and made["name"] == "Post"
    ambiguous = await refused(
        client,
        "write",
        {"address": f"hm://{KeyPair.generate().account_id}/p", "content": "x", "options": {"name": "P"}},
    )
    assert "signer" in ambiguous["message"]


async def test_identities_publish_profile_and_home_document(client: Client, harness: Harness) -> None:
    created = create_identity(harness, "Agent Smith")
    grant(harness, created)
    profile = await call(client, "read", {"address": f"hm://{created.account_id}/:profile"})
    assert profile["name"] == "Agent Smith"
    home = await call(client, "read", {"address": f"hm://{created.account_id}"})
    assert "This is an agentic account." in home["markdown"] and home["name"] == "Agent Smith"
    update_identity(harness, created.name, "Agent Jones")
    assert (await call(client, "read", {"address": f"hm://{created.account_id}/:profile"}))["name"] == "Agent Jones"
    imported = import_identity(harness, bytes(range(32)), "Imported")
    missing = await refused(client, "read", {"address": f"hm://{imported.account_id}/:profile"})
    assert missing["status"] == 404
    assert (await refused(client, "read", {"address": f"hm://{imported.account_id}"}))["status"] == 404


async def test_every_blob_the_node_signed_verifies_in_the_official_client(
    client: Client, alice: Identity, harness: Harness
) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/notes", "content": DOC})
    await call(
        client,
        "write",
        {"address": f"{base}/notes", "content": DOC.replace("three", "five"), "options": {"action": "update"}},
    )
    await call(client, "write", {"address": f"{base}/notes", "content": "Nice.", "options": {"action": "comment"}})
    await call(client, "write", {"address": f"{base}/notes", "options": {"action": "move", "toPath": "/n2"}})
    await call(client, "write", {"address": f"{base}/n2", "options": {"action": "delete"}})
    checked = verify_all_blobs(harness)
    assert {"Change", "Ref", "Comment", "Profile"} <= checked


async def test_ingest_verifies_every_blob_and_stores_all_or_none(
    client: Client, alice: Identity, harness: Harness
) -> None:
    url = f"hm://{alice.account_id}/notes"
    await call(client, "write", {"address": url, "content": DOC})
    with harness.db.reading() as conn:
        rows = [(bytes(r["data"]), r["cid"]) for r in conn.execute("SELECT data, cid FROM hm_blobs")]
    other = Harness(load_settings(data_dir=harness.data_dir.parent / "other"))
    try:
        tampered = bytearray(rows[-1][0])
        tampered[-1] ^= 1
        with pytest.raises(BadRequest):
            other.hypermedia.ingest([*rows[:-1], (bytes(tampered), None)])
        with other.db.reading() as conn:
            assert conn.execute("SELECT COUNT(*) FROM hm_blobs").fetchone()[0] == 0
        other.hypermedia.ingest(rows)
        document = other.hypermedia.document(alice.account_id, "/notes")
        assert (
            document.name == "Field notes"
            and document.version == harness.hypermedia.document(alice.account_id, "/notes").version
        )
    finally:
        other.close()


def test_server_run_turns_are_told_which_identities_they_can_sign_as(harness: Harness) -> None:
    from mcp_harness.runs.prompt import system_prompt

    assert "<available_signing_identities>" not in system_prompt(harness, harness.agent(), "Base.")
    identity = create_identity(harness, "Alice")
    grant(harness, identity)
    prompt = system_prompt(harness, harness.agent(), "Base.")
    block = prompt.split("<available_signing_identities>\n")[1].split("\n</available_signing_identities>")[0]
    assert json.loads(block) == [{"name": "Alice", "publicKey": identity.account_id}]
    assert "write hm://<publicKey>/<path>" in prompt


def test_a_prompt_that_embeds_a_document_gets_its_content_at_run_time(harness: Harness) -> None:
    from mcp_harness.runs.prompt import system_prompt

    identity = create_identity(harness, "Alice")
    node = harness.hypermedia
    key = load_keypair(harness, identity.name)
    guide = metadata_operations({"name": "Style guide"}) + document_operations(
        (BlockNode(Block(id="g1", type="Paragraph", text="Always answer in haiku.")),)
    )
    node.publish(node.create(key, identity.account_id, "/style", guide))
    agent = harness.agent()
    blocks = [
        {"block": {"id": "p1", "type": "Paragraph", "text": "You are terse."}},
        {"block": {"id": "e1", "type": "Embed", "link": f"hm://{identity.account_id}/style", "text": ""}},
    ]
    harness.agents.update(agent.id, normalize_definition({**agent.definition.to_json(), "systemPrompt": blocks}))
    prompt = system_prompt(harness, harness.agent(), harness.agent().definition.system_prompt)
    assert "You are terse." in prompt and "Always answer in haiku." in prompt and "Style guide" in prompt
    # A delegated child's replacement prompt is used verbatim.
    assert "haiku" not in system_prompt(harness, harness.agent(), "Child prompt.")
