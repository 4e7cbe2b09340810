"""`call search` over the embedded node, through the SDK client: keyword search of documents, profiles and comments
published with `write hm://` by two identities — block refs, snippets, ranking, filters, pages, and only what is
current (edits, deletions, moves) — plus the grants that gate it and the contract misses of bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client

from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import Identity, create_identity
from mcp_harness.server import build_server
from tests.callables.search_kit import search, snippets, urls
from tests.conftest import call
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio

NOTES = """---
name: "Heron notes"
---

We saw three herons wading near the river at dawn.

The kingfisher stayed on its branch all morning.
"""


@pytest.fixture
def people(harness: Harness) -> tuple[Identity, Identity]:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob Builder")
    grant(harness, alice, bob)
    return alice, bob


@pytest.fixture
async def c(harness: Harness, people: tuple[Identity, Identity]) -> AsyncIterator[Client]:
    async with Client(build_server(harness)) as client:
        yield client


async def publish(c: Client, url: str, content: str, **options: object) -> dict[str, object]:
    return await call(c, "write", {"address": url, "content": content, "options": options})


async def test_titles_by_default_blocks_with_include_body_as_block_refs_that_read_back(
    c: Client, people: tuple[Identity, Identity]
) -> None:
    alice, _ = people
    url = f"hm://{alice.account_id}/notes"
    made = await publish(c, url, NOTES)
    titles = await search(c, query="heron")
    assert titles["searchType"] == "keyword" and titles["includeBody"] is False and titles["scope"] == "hypermedia"
    assert urls(titles) == [f"{url}?v={made['version']}&l"]
    [hit] = titles["results"]
    assert hit["type"] == "document" and hit["title"] == "Heron notes" and hit["parentNames"] == ["Alice"]
    assert "blockId" not in hit and hit["versionTime"].endswith("Z")
    assert (await search(c, query="kingfisher"))["results"] == [], "bodies are searched only with includeBody"

    body = await search(c, query="kingfisher", includeBody=True)
    [block] = body["results"]
    assert block["url"].startswith(f"{url}?v={made['version']}&l#") and block["url"].endswith("#" + block["blockId"])
    assert block["snippet"] == "The kingfisher stayed on its branch al…" and block["title"] == "Heron notes"
    assert block["range"] == [4, 14]
    read = await call(c, "read", {"address": block["url"]})
    assert "kingfisher stayed on its branch all morning" in read["markdown"] and "herons" not in read["markdown"]
    assert "1. [Heron notes](" in body["markdown"] and "Match: The kingfisher" in body["markdown"]
    assert body["summary"] == 'Found 1 result for "kingfisher".'


async def test_profiles_and_comments_by_a_second_identity(c: Client, people: tuple[Identity, Identity]) -> None:
    alice, bob = people
    target = f"hm://{alice.account_id}/notes"
    await publish(c, target, NOTES)
    comment = await publish(c, target, "Lovely egrets, too.", action="comment", signer=bob.account_id)
    assert str(comment["id"]).startswith(f"hm://{bob.account_id}/")
    found = await search(c, query="egrets", includeBody=True)
    [hit] = found["results"]
    assert hit == {
        "type": "comment",
        "title": "Comment by Bob Builder on Heron notes",
        "url": comment["id"],
        "target": target,
        "snippet": "Lovely egrets, too.",
        "versionTime": hit["versionTime"],
        "score": hit["score"],
    }
    assert (await search(c, query="egrets"))["results"] == [], "comments are bodies"
    profile = await search(c, query="builder")
    assert [(r["type"], r["url"]) for r in profile["results"]] == [
        ("document", profile["results"][0]["url"]),  # Bob's home document is named after him
        ("profile", f"hm://{bob.account_id}"),
    ]
    assert profile["results"][0]["url"].startswith(f"hm://{bob.account_id}?v=")


async def test_titles_rank_first_then_bm25_and_phrases_prefixes_and_any_text_are_safe(
    c: Client, people: tuple[Identity, Identity]
) -> None:
    alice, _ = people
    base = f"hm://{alice.account_id}"
    await publish(c, f"{base}/once", "---\nname: Pond\n---\n\nA heron, once, in a long paragraph about the pond.\n")
    await publish(c, f"{base}/often", "---\nname: Wading\n---\n\nHeron heron heron.\n")
    await publish(c, f"{base}/titled", "---\nname: Heron day\n---\n\nNothing else here.\n")
    ranked = await search(c, query="heron", includeBody=True)
    assert [r["title"] for r in ranked["results"]] == ["Heron day", "Wading", "Pond"]
    assert ranked["results"][0]["type"] == "document" and "blockId" not in ranked["results"][0]
    assert ranked["results"][1]["score"] < ranked["results"][2]["score"], "bm25: lower is better"
    assert [r["title"] for r in (await search(c, query="wad", includeBody=True))["results"]] == ["Wading"]
    assert (await search(c, query='"pond heron"', includeBody=True))["results"] == []
    phrase = await search(c, query='"long paragraph"', includeBody=True)
    assert [r["title"] for r in phrase["results"]] == ["Pond"]
    assert [r["title"] for r in (await search(c, query="hero* pond", includeBody=True))["results"]] == ["Pond"]
    for hostile in ('NEAR(heron pond) OR "x', "title:heron", "heron AND NOT pond", "* ^ - ( heron", 'he"ron'):
        result = await search(c, query=hostile, includeBody=True)
        assert "results" in result, hostile  # words only: never an FTS5 syntax error


async def test_account_filter_page_size_and_context_size(c: Client, people: tuple[Identity, Identity]) -> None:
    alice, bob = people
    for who in (alice, bob):
        for i in range(3):
            await publish(c, f"hm://{who.account_id}/n{i}", f"---\nname: Marsh {i}\n---\n\nA marsh walk, part {i}.\n")
    everyone = await search(c, query="marsh")
    assert len(everyone["results"]) == 6
    only_bob = await search(c, query="marsh", accountUid=bob.account_id, includeBody=True)
    assert len(only_bob["results"]) == 6 and all(u.startswith(f"hm://{bob.account_id}/") for u in urls(only_bob))
    assert len((await search(c, query="marsh", pageSize=2))["results"]) == 2
    text = "x" * 200 + " the bittern boomed " + "y" * 200
    await publish(c, f"hm://{alice.account_id}/long", f"---\nname: Long\n---\n\n{text}\n")
    assert snippets(await search(c, query="bittern", includeBody=True, contextSize=0)) == ["…bittern…"]
    [wide] = snippets(await search(c, query="bittern", includeBody=True, contextSize=20))
    assert wide == "…" + "x" * 5 + " the bittern boomed yy…"
    [default] = snippets(await search(c, query="bittern", includeBody=True))
    assert len(default) == len("bittern") + 48 + 2


async def test_only_the_current_version_is_found_after_edits_deletions_and_moves(
    c: Client, people: tuple[Identity, Identity]
) -> None:
    alice, _ = people
    url = f"hm://{alice.account_id}/notes"
    await publish(c, url, NOTES)
    read = await call(c, "read", {"address": url})
    edited = str(read["markdown"]).replace("three herons", "two cormorants")
    second = await publish(c, url, edited, action="update")
    assert (await search(c, query="herons", includeBody=True))["results"] == []
    [hit] = (await search(c, query="cormorants", includeBody=True))["results"]
    assert hit["url"].startswith(f"{url}?v={second['version']}&l#")
    kept = await search(c, query="kingfisher", includeBody=True)
    assert urls(kept)[0].startswith(f"{url}?v={second['version']}&l#"), "unchanged blocks name the new version"

    await publish(c, f"hm://{alice.account_id}/moving", "---\nname: Grebe log\n---\n\nA grebe dived.\n")
    await call(
        c, "write", {"address": f"hm://{alice.account_id}/moving", "options": {"action": "move", "toPath": "/moved"}}
    )
    assert [u.split("?")[0] for u in urls(await search(c, query="grebe"))] == [f"hm://{alice.account_id}/moved"]
    await call(c, "write", {"address": f"hm://{alice.account_id}/moved", "options": {"action": "delete"}})
    await call(c, "write", {"address": url, "options": {"action": "delete"}})
    for gone in ("grebe", "cormorants", "kingfisher", "heron"):
        assert (await search(c, query=gone, includeBody=True))["results"] == [], gone


async def test_bad_input_gets_the_contract_back(c: Client) -> None:
    for bad, expected in [
        ({"query": ""}, "$.query"),
        ({"query": "!!! ..."}, "$.query: '!!! ...' holds no letter or digit to search for"),
        ({"query": "x", "pageSize": 51}, "$.pageSize"),
        ({"query": "x", "pageSize": 0}, "$.pageSize"),
        ({"query": "x", "contextSize": 513}, "$.contextSize"),
        ({"query": "x", "searchType": "fuzzy"}, "$.searchType"),
        ({"query": "x", "scope": "web"}, "$.scope"),
        ({"query": "x", "accountUid": "alice"}, "$.accountUid: Not an Ed25519 account id: 'alice'"),
        ({"query": "x", "limit": 3}, "$.limit"),
    ]:
        miss = await search(c, **bad)
        assert (
            miss["summary"] == "Input for search did not match its contract — here it is; call again with valid input."
        )
        assert any(e.startswith(expected) for e in miss["validationErrors"]), (bad, miss["validationErrors"])
        assert miss["contract"].startswith("# search") and '"scope"' in miss["contract"]


async def test_grants_gate_it_and_listings_show_it(harness: Harness) -> None:
    async with Client(build_server(harness)) as c:
        assert "search" in (await call(c, "read", {"address": "~/tools/"}))["tools"]
        assert "search" in (await call(c, "read", {"address": "~/self"}))["grants"]["callableTools"]
        contract = await call(c, "read", {"address": "~/tools/search"})
        assert contract["kind"] == "builtin" and "block ref" in contract["contract"]
        assert "results" in await search(c, query="anything")
    agent = harness.agent()
    harness.agents.update(agent.id, normalize_definition({**agent.definition.to_json(), "tools": ["execute"]}))
    async with Client(build_server(harness)) as c:
        listed = await search(c, query="anything")
        assert listed["summary"] == "No callable tool named search. Here is what you can call."
        assert "search" not in listed["tools"]
        assert "search" not in (await call(c, "read", {"address": "~/self"}))["grants"]["callableTools"]
