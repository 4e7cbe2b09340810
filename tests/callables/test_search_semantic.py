"""`search` with `searchType: semantic | hybrid` against a real loopback server speaking the OpenAI embeddings wire
format (`tests/callables/search_kit.py`): meaning finds what spelling does not, vectors are embedded once, hybrid
blends both rankings, and without an embedder the request is refused naming the setting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import Identity, create_identity
from mcp_harness.models import wire
from mcp_harness.server import build_server
from tests.callables.search_kit import Embeddings, embeddings_server, search, urls
from tests.conftest import call, refused
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio


@pytest.fixture
async def api() -> AsyncIterator[Embeddings]:
    async with embeddings_server() as served:
        yield served
    await wire.aclose_shared_http_client()  # the shared client's pool belongs to this test's event loop


@pytest.fixture
def semantic(tmp_path: Path, api: Embeddings) -> Iterator[Harness]:
    providers = {"emb": {"type": "custom", "base_url": f"{api.base}/v1"}}
    search_settings = {"embeddings_provider": "emb", "embeddings_model": "topic-embed-1"}
    h = Harness(load_settings(data_dir=tmp_path / "data", providers=providers, search=search_settings))
    yield h
    h.close()


async def _publish(c: Client, who: Identity) -> dict[str, str]:
    base = f"hm://{who.account_id}"
    docs = {
        "wading": "---\nname: Morning at the marsh\n---\n\nA grey heron and an egret stood in the shallows.\n",
        "harbour": "---\nname: Harbour log\n---\n\nThree ships and a small boat came in under sail.\n",
        "bakery": "---\nname: Loaves\n---\n\nThe dough rose twice before the bread went in.\n",
    }
    for path, content in docs.items():
        await call(c, "write", {"address": f"{base}/{path}", "content": content})
    return {path: f"{base}/{path}" for path in docs}


async def test_semantic_finds_by_meaning_and_embeds_each_text_once(semantic: Harness, api: Embeddings) -> None:
    alice = create_identity(semantic, "Alice")
    grant(semantic, alice)
    async with Client(build_server(semantic)) as c:
        docs = await _publish(c, alice)
        found = await search(c, query="birds", searchType="semantic", includeBody=True)
        assert found["searchType"] == "semantic" and "partial" not in found
        assert [u.split("?")[0] for u in urls(found)] == [docs["wading"]], "no keyword match: meaning found it"
        [hit] = found["results"]
        assert hit["blockId"] and hit["snippet"].startswith("A grey heron") and 0.9 < hit["score"] <= 1.0
        assert {body["model"] for body in api.requests} == {"topic-embed-1"}
        embedded = len(api.inputs)
        assert "birds" in api.inputs and "A grey heron and an egret stood in the shallows." in api.inputs

        again = await search(c, query="birds", searchType="semantic", includeBody=True)
        assert urls(again) == urls(found) and len(api.inputs) == embedded, "nothing is embedded twice"
        boats = await search(c, query="vessel", searchType="semantic", includeBody=True)
        assert {u.split("?")[0] for u in urls(boats)} == {docs["harbour"]}  # its title and its block
        assert api.inputs[embedded:] == ["vessel"], "a new query embeds only itself"

        read = await call(c, "read", {"address": docs["wading"]})
        edited = str(read["markdown"]).replace("A grey heron and an egret", "A kingfisher")
        await call(c, "write", {"address": docs["wading"], "content": edited, "options": {"action": "update"}})
        before = len(api.inputs)
        await search(c, query="birds", searchType="semantic", includeBody=True)
        assert api.inputs[before:] == ["A kingfisher stood in the shallows."], "only the edited block"


async def test_hybrid_blends_keyword_and_semantic_and_is_the_default_with_an_embedder(
    semantic: Harness, api: Embeddings
) -> None:
    alice = create_identity(semantic, "Alice")
    grant(semantic, alice)
    async with Client(build_server(semantic)) as c:
        docs = await _publish(c, alice)
        await call(c, "write", {"address": "~/memory/ships.md", "content": "Notes on ships.\n"})
        blended = await search(c, query="heron", includeBody=True)
        assert blended["searchType"] == "hybrid"
        assert [u.split("?")[0] for u in urls(blended)] == [docs["wading"]]
        mixed = await search(c, query="ships", searchType="hybrid", includeBody=True, scope="all")
        found = [(r["url"].split("?")[0], "blockId" in r) for r in mixed["results"]]
        # The block and the memory file match in both rankings; the title "Harbour log" only by meaning, so last.
        assert set(found[:2]) == {(docs["harbour"], True), ("~/memory/ships.md", False)}
        assert found[2:] == [(docs["harbour"], False)]
        keyword = await search(c, query="loaves", searchType="keyword", includeBody=True)
        assert [u.split("?")[0] for u in urls(keyword)] == [docs["bakery"]]
        api.fail = [500, 500]
        degraded = await search(c, query="egret", searchType="hybrid", includeBody=True, pageSize=5)
        assert [u.split("?")[0] for u in urls(degraded)] == [docs["wading"]], "keyword results survive"
        assert degraded["partial"] is True and "Semantic ranking failed" in degraded["notes"][0]
        api.fail = [500, 500]
        error = await refused(c, "call", {"tool": "search", "input": {"query": "gulls", "searchType": "semantic"}})
        assert error["status"] == 500 and "embedding backend down" in error["message"]


async def test_without_an_embedder_semantic_and_hybrid_are_refused_naming_the_setting(harness: Harness) -> None:
    async with Client(build_server(harness)) as c:
        for mode in ("semantic", "hybrid"):
            error = await refused(c, "call", {"tool": "search", "input": {"query": "birds", "searchType": mode}})
            assert error["status"] == 400 and "[search] embeddings_provider" in error["message"]
            assert 'searchType "keyword"' in error["message"]
        assert (await search(c, query="birds"))["searchType"] == "keyword"


async def test_a_provider_that_cannot_embed_is_refused(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data",
        providers={"claude": {"type": "anthropic", "api_key_env": "NO_SUCH_KEY_ENV"}},
        search={"embeddings_provider": "claude", "embeddings_model": "x"},
    )
    h = Harness(settings)
    try:
        async with Client(build_server(h)) as c:
            error = await refused(c, "call", {"tool": "search", "input": {"query": "birds"}})
            assert "no OpenAI-compatible embeddings endpoint" in error["message"]
    finally:
        h.close()
