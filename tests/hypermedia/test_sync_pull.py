"""Pull (issue 19 point 3) between two harnesses on loopback: `read hm://` of a document A lacks fetches it (and its
comments) from B as raw blobs, verified before storing; `options.fresh` fetches a newer version of one A holds; a
blob B serves tampered is refused and nothing of it stored; a document no server has reads as not found; and
`mcp-harness hm pull` does the same from the command line, with its exit codes."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from mcp_harness.cli import main
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
from mcp_harness.identity.identities import load_keypair
from mcp_harness.identity.keys import KeyPair
from mcp_harness.server import build_server
from tests.conftest import call, refused
from tests.hypermedia.sync_kit import Pair, pair

pytestmark = pytest.mark.anyio


async def _bob_writes(p: Pair, path: str = "/field-notes") -> str:
    doc = f"hm://{p.bob.account_id}{path}"
    async with Client(build_server(p.b)) as bob:
        await call(bob, "write", {"address": doc, "content": "---\nname: Field notes\n---\n\nA heron, at dawn."})
        await call(bob, "write", {"address": doc, "content": "Seen again at dusk.", "options": {"action": "comment"}})
    return doc


async def test_reading_a_missing_document_pulls_it_with_its_comments(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        doc = await _bob_writes(p)
        async with Client(build_server(p.a)) as client:
            read = await call(client, "read", {"address": doc})
            assert "A heron, at dawn." in read["markdown"] and read["name"] == "Field notes"
            assert read["pulled"]["server"] == p.base and read["pulled"]["comments"] == 1
            comments = await call(client, "read", {"address": f"{doc}/:comments"})
            assert comments["totalComments"] == 1 and "dusk" in comments["comments"][0]["markdown"]
        events = p.a.hypermedia.activity.list_events(resource=doc)["events"]
        assert {e["type"] for e in events} >= {"doc-update", "comment"}  # pulled blobs feed the activity feed


async def test_fresh_fetches_a_newer_version(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        doc = await _bob_writes(p)
        async with Client(build_server(p.a)) as client:
            await call(client, "read", {"address": doc})
            async with Client(build_server(p.b)) as bob:
                await call(
                    bob,
                    "write",
                    {"address": doc, "content": "A heron, and a kingfisher.", "options": {"action": "update"}},
                )
            stale = await call(client, "read", {"address": doc})
            assert "kingfisher" not in stale["markdown"] and "pulled" not in stale
            fresh = await call(client, "read", {"address": doc, "options": {"fresh": True}})
            assert "kingfisher" in fresh["markdown"] and fresh["pulled"]["stored"] >= 2


async def test_a_writers_document_comes_with_the_capability_that_admits_it(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        bob = load_keypair(p.b, p.bob.name)
        carol = KeyPair.generate()
        node = p.b.hypermedia
        cap = blobs.capability(bob, delegate=carol.account_id, ts=blobs.now_ms(), path="/shared")
        genesis = blobs.genesis_change(carol)
        ops = metadata_operations({"name": "Shared"}) + document_operations(parse_markdown("Carol wrote this.").tree)
        ts = blobs.now_ms() + 1
        change = blobs.change(carol, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=ops, ts=ts)
        ref = blobs.ref(
            carol, space=bob.account_id, path="/shared", genesis=genesis.cid, heads=[change.cid], generation=ts, ts=ts
        )
        node.publish([cap, genesis, change, ref])  # B took them as they are (its own publish checks no writer)
        async with Client(build_server(p.a)) as client:
            read = await call(client, "read", {"address": f"hm://{bob.account_id}/shared"})
        assert "Carol wrote this." in read["markdown"]
        assert p.a.hypermedia.store.has_capability(bob.account_id, carol.account_id, "/shared")


async def test_a_tampered_blob_on_the_server_is_refused_and_nothing_stored(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        doc = await _bob_writes(p)
        ref = p.b.hypermedia.ref(p.bob.account_id, "/field-notes")
        assert ref is not None
        cid = ref.heads[0]
        with p.b.db.transaction() as conn:  # B serves the document's Change with bytes that no longer match its CID
            (data,) = conn.execute("SELECT data FROM hm_blobs WHERE cid = ?", (cid,)).fetchone()
            conn.execute("UPDATE hm_blobs SET data = ? WHERE cid = ?", (bytes(data[:-1]) + b"\x00", cid))
        async with Client(build_server(p.a)) as client:
            error = await refused(client, "read", {"address": doc})
        assert error["status"] == 400 and cid in error["message"] and "do not hash" in error["message"]
        assert p.a.hypermedia.store.data(cid) is None and p.a.hypermedia.ref(p.bob.account_id, "/field-notes") is None


async def test_a_document_no_server_has_is_not_found(tmp_path: Path) -> None:
    async with pair(tmp_path) as p, Client(build_server(p.a)) as client:
        error = await refused(client, "read", {"address": f"hm://{p.bob.account_id}/nowhere"})
        assert error["status"] == 404 and p.base in error["message"]
        bad = await refused(client, "read", {"address": f"hm://{p.bob.account_id}/x", "options": {"fresh": "yes"}})
        assert "fresh must be a boolean" in bad["message"]


async def test_hm_pull_on_the_command_line(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        doc = await _bob_writes(p)
        config = tmp_path / "a.toml"
        config.write_text(
            f'[web]\nallow_hosts = ["127.0.0.1"]\n\n[[hypermedia.servers]]\nurl = "{p.base}"\ntoken_secret = "seed-b"\n'
        )

        async def cli(*args: str) -> tuple[int, str]:
            out = io.StringIO()

            def run() -> int:
                with contextlib.redirect_stdout(out):
                    return main([*args, "--data-dir", str(tmp_path / "a"), "--config", str(config), "--json"])

            return await anyio.to_thread.run_sync(run), out.getvalue()

        code, out = await cli("hm", "pull", doc)
        assert code == 0 and json.loads(out)["comments"] == 1
        assert p.a.hypermedia.document(p.bob.account_id, "/field-notes").name == "Field notes"
        code, _ = await cli("hm", "pull", f"hm://{p.bob.account_id}/nowhere")
        assert code == 3
        code, _ = await cli("hm", "pull", "not-an-address")
        assert code == 2
