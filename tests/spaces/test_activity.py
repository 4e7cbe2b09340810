"""`read activity:` through the MCP client: the node's feed as Seed's ListEvents, with its summary, options and
refusals (HARNESS §11.2)."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity
from tests.conftest import call, refused, text_of
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio


async def test_a_comment_that_mentions_the_agent_reads_back_as_events(client: Client, harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    grant(harness, alice, bob)
    a = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{a}/post", "content": "A post.", "options": {"name": "Post"}})
    said = await call(
        client,
        "write",
        {"address": f"{a}/post", "content": f"Over to [you]({a})!", "options": {"action": "comment", "signer": "Bob"}},
    )
    feed = await call(client, "read", {"address": "activity:", "options": {"eventTypes": ["comment", "citation"]}})
    assert feed["summary"] == "Loaded 2 activity feed events."
    assert set(feed) == {"summary", "events", "nextPageToken", "totalEvents"} and feed["nextPageToken"] == ""
    mention, commented = feed["events"]
    assert commented["type"] == "comment" and f"hm://{commented['comment']['id']}" == said["id"]
    assert commented["author"]["metadata"]["name"] == "Bob" and commented["target"]["id"]["id"] == f"{a}/post"
    assert mention["type"] == "citation" and mention["target"]["id"]["id"] == a
    assert mention["feedEventId"] == f"mention-{commented['id']}--{a}"
    # The text a model reads: one line per event.
    result = await client.call_tool("read", {"address": "activity:", "options": {"pageSize": 1}})
    lines = text_of(result).splitlines()
    assert lines[0] == "Loaded 1 activity feed event." and "cited" in lines[2] and "pageToken" in lines[3]


async def test_current_account_defaults_to_the_agents_first_identity(client: Client, harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    grant(harness, alice)
    # Bob's events by Bob only: nobody trusted him; Alice (the agent's identity) trusts herself.
    mine = await call(client, "read", {"address": "activity:", "options": {"trustedOnly": True}})
    assert [e["author"]["id"]["uid"] for e in mine["events"]] == [alice.account_id]
    theirs = await call(
        client, "read", {"address": "activity:", "options": {"trustedOnly": True, "currentAccount": bob.account_id}}
    )
    assert [e["author"]["id"]["uid"] for e in theirs["events"]] == [bob.account_id]
    as_json = await client.call_tool("read", {"address": "activity:", "format": "json", "options": {"pageSize": 1}})
    assert '"feedEventId"' in text_of(as_json)


async def test_refusals_name_the_option_and_what_it_accepts(client: Client, harness: Harness) -> None:
    unknown = await refused(client, "read", {"address": "activity:", "options": {"order": "observed"}})
    assert unknown["status"] == 400 and '"order"' in unknown["message"] and "pageSize, pageToken" in unknown["message"]
    bad = await refused(client, "read", {"address": "activity:", "options": {"pageSize": "ten"}})
    assert "pageSize must be a number" in bad["message"]
    types = await refused(client, "read", {"address": "activity:", "options": {"eventTypes": ["mention"]}})
    assert "eventTypes[]" in types["message"] and "citation" in types["message"]
    # Without a signing identity there is no account to trust from.
    lonely = await refused(client, "read", {"address": "activity:", "options": {"trustedOnly": True}})
    assert "trustedOnly needs currentAccount" in lonely["message"]
    empty = await call(client, "read", {"address": "activity:"})
    assert empty == {"summary": "Loaded 0 activity feed events.", "events": [], "nextPageToken": "", "totalEvents": 0}
