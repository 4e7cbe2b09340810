"""`search` beyond the reference: `scope: "memory"` / `"all"` over the calling agent's memory files — found however
they were written (a `write`, or code changing the tree directly), forgotten when deleted, private to the agent — and
the index an older database gets on upgrade (the m015 backfill)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity
from mcp_harness.server import build_server
from mcp_harness.store import memory_search
from tests.callables.search_kit import search, snippets, urls
from tests.conftest import call
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio


async def test_memory_scope_finds_files_with_their_line_and_all_mixes_in_hypermedia(harness: Harness) -> None:
    alice = create_identity(harness, "Alice")
    grant(harness, alice)
    async with Client(build_server(harness)) as c:
        await call(c, "write", {"address": "~/memory/notes/birds.md", "content": "# Birds\n\nA heron at the weir.\n"})
        await call(c, "write", {"address": "~/memory/heron-count.txt", "content": "12 on Monday\n"})
        await call(c, "write", {"address": "~/memory/bread.md", "content": "Flour, water, salt.\n"})
        await call(
            c, "write", {"address": f"hm://{alice.account_id}/h", "content": "---\nname: Heron survey\n---\n\nx\n"}
        )
        found = await search(c, query="heron", scope="memory")
        assert found["scope"] == "memory" and set(urls(found)) == {
            "~/memory/notes/birds.md",
            "~/memory/heron-count.txt",
        }
        assert urls(found)[0] == "~/memory/heron-count.txt", "a match in the name weighs more than one in the text"
        by_url = {r["url"]: r for r in found["results"]}
        birds = by_url["~/memory/notes/birds.md"]
        assert birds["type"] == "memory" and birds["title"] == "notes/birds.md" and birds["line"] == 3
        assert birds["snippet"] == "# Birds A heron at the weir."
        read = await call(c, "read", {"address": birds["url"]})
        assert "A heron at the weir." in read["content"]
        assert urls(await search(c, query="heron")) == [urls(await search(c, query="heron survey"))[0]]
        both = await search(c, query="heron", scope="all")
        assert [r["type"] for r in both["results"]] == ["document", "memory", "memory"], "titles rank first"
        assert "scope: all" in both["markdown"]


async def test_files_changed_outside_the_verbs_are_found_and_deleted_ones_forgotten(harness: Harness) -> None:
    memory = harness.memory(harness.agent()).root
    async with Client(build_server(harness)) as c:
        await call(c, "write", {"address": "~/memory/log.md", "content": "The otter swam.\n"})
        assert urls(await search(c, query="otter", scope="memory")) == ["~/memory/log.md"]
        # What code in the sandbox does to /workspace: change files in place, add, delete, plant links and binaries.
        (memory / "log.md").write_text("The beaver swam, and swam again at length.\n")
        (memory / "deep" / "er").mkdir(parents=True)
        (memory / "deep" / "er" / "found.md").write_text("An otter, at last.\n")
        (memory / "blob.bin").write_bytes(b"otter\x00\x01\x02")
        (memory / "link.md").symlink_to(memory / "deep" / "er" / "found.md")
        assert urls(await search(c, query="otter", scope="memory")) == ["~/memory/deep/er/found.md"]
        assert urls(await search(c, query="beaver", scope="memory")) == ["~/memory/log.md"]
        assert urls(await search(c, query="blob", scope="memory")) == ["~/memory/blob.bin"], "binaries: by name only"
        (memory / "deep" / "er" / "found.md").unlink()
        assert (await search(c, query="otter", scope="memory"))["results"] == []
        await call(c, "write", {"address": "~/memory/log.md", "options": {"delete": True}})
        assert (await search(c, query="beaver", scope="memory"))["results"] == []


async def test_another_agents_memory_is_not_searched(harness: Harness) -> None:
    other = harness.agents.create(
        harness.account_id, normalize_definition({**harness.default_definition().to_json(), "name": "other"})
    )
    (harness.memory(other).root).mkdir(parents=True, exist_ok=True)
    (harness.memory(other).root / "secret.md").write_text("The pelican plan.\n")
    async with Client(build_server(harness)) as c:
        await call(c, "write", {"address": "~/memory/mine.md", "content": "My pelican.\n"})
        assert urls(await search(c, query="pelican", scope="all")) == ["~/memory/mine.md"]


def test_reconcile_reads_only_what_changed_and_stops_at_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.md").write_text(f"note {i}\n")
    first = memory_search.changes(str(tmp_path), {})
    assert sorted(p for p, *_ in first.upserts) == [f"f{i}.md" for i in range(5)] and not first.partial
    known = {path: (size, mtime) for path, size, mtime, _ in first.upserts}
    assert memory_search.changes(str(tmp_path), known).upserts == []
    (tmp_path / "f1.md").write_text("changed, longer\n")
    (tmp_path / "f2.md").unlink()
    again = memory_search.changes(str(tmp_path), known)
    assert [(p, text) for p, _, _, text in again.upserts] == [("f1.md", "changed, longer\n")]
    assert again.removed == ["f2.md"]
    monkeypatch.setattr(memory_search, "READ_BUDGET_BYTES", 14)
    capped = memory_search.changes(str(tmp_path), {})
    assert len(capped.upserts) == 2 and capped.partial and capped.removed == []


async def test_an_older_database_is_indexed_on_upgrade(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    harness = Harness(settings)
    alice = create_identity(harness, "Alice")
    grant(harness, alice)
    base = f"hm://{alice.account_id}"
    async with Client(build_server(harness)) as c:
        await call(c, "write", {"address": f"{base}/old", "content": "---\nname: Old\n---\n\nThe curlew called.\n"})
        read = await call(c, "read", {"address": f"{base}/old"})
        edited = str(read["markdown"]).replace("curlew", "lapwing")
        await call(c, "write", {"address": f"{base}/old", "content": edited, "options": {"action": "update"}})
        await call(
            c, "write", {"address": f"{base}/old", "content": "A curlew reply.", "options": {"action": "comment"}}
        )
    with harness.db.transaction() as conn:  # as a version without m015 left it: the node's tables, no index
        for table in ("hm_search_items", "hm_search_text", "hm_search_docs", "memory_search_files"):
            conn.execute(f"DROP TABLE {table}")
        for table in ("memory_search_text", "search_vectors"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DROP TRIGGER memory_search_agent_gone")
        conn.execute("DELETE FROM _harness_migrations WHERE name = 'm015_hm_search'")
    harness.close()
    upgraded = Harness(settings)
    try:
        async with Client(build_server(upgraded)) as c:
            assert snippets(await search(c, query="curlew", includeBody=True)) == ["A curlew reply."]
            [hit] = (await search(c, query="lapwing", includeBody=True))["results"]
            assert hit["url"].startswith(f"{base}/old?v=") and "#" in hit["url"]
            assert [r["type"] for r in (await search(c, query="alice"))["results"]] == ["document", "profile"]
    finally:
        upgraded.close()
