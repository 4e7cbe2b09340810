"""Push (issue 19 point 2) between two harnesses on loopback: a write owes its blobs to the auto-push server in its
own commit and says so; the worker's pass delivers them with the sealed bearer token; a server that is down keeps
them queued with backoff; a refused blob is set aside, reported, and put back by `hm push`; `hm push DOC` owes a
whole document again."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import anyio
import anyio.to_thread
import httpx2
import pytest
from mcp import Client

from mcp_harness.cli import main
from mcp_harness.hypermedia.unixfs import import_bytes
from mcp_harness.identity.identities import create_identity
from mcp_harness.server import build_server
from mcp_harness.store._util import now_ms
from mcp_harness.store.hm_push import PushQueue
from tests.conftest import call
from tests.hypermedia.sync_kit import Pair, harness_a, pair, pending

pytestmark = pytest.mark.anyio


async def test_a_write_is_queued_in_its_commit_and_the_worker_pushes_it(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        doc = f"hm://{p.alice.account_id}/notes"
        async with Client(build_server(p.a)) as client:
            wrote = await call(client, "write", {"address": doc, "content": "---\nname: Notes\n---\n\nHello."})
        (status,) = wrote["push"]
        assert status["server"] == p.base and status["queued"] == 3 and status["pending"] >= 3
        assert "Push queued" in wrote["summary"]
        assert p.b.hypermedia.ref(p.alice.account_id, "/notes") is None  # publishing did not wait on the network
        (report,) = await anyio.to_thread.run_sync(p.a.sync.pusher.push_once)
        assert report.delivered >= 3 and not report.failed and pending(p.a) == 0
        pushed = p.b.hypermedia.document(p.alice.account_id, "/notes")
        assert pushed.version == wrote["version"] and pushed.name == "Notes"
        profile = p.b.hypermedia.profile(p.alice.account_id)
        assert profile is not None and profile["name"] == "Alice"  # the identity's own publish went too


async def test_a_documents_files_are_pushed_block_by_block(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        data = bytes(range(256)) * 1200  # 300 KiB: two raw leaves under a dag-pb root
        p.a.memory(p.a.agent()).write_file("docs/data.bin", data)
        content = "# Data\n\n<file://~/memory/docs/data.bin> <!-- id:f1 type:File -->\n"
        async with Client(build_server(p.a)) as client:
            wrote = await call(
                client,
                "write",
                {"address": f"hm://{p.alice.account_id}/data", "content": content, "options": {"name": "Data"}},
            )
        assert wrote["push"][0]["queued"] == 3 + 3  # genesis, change, ref, and the file's three blocks
        await anyio.to_thread.run_sync(p.a.sync.pusher.push_once)
        root, _ = import_bytes(data)
        async with httpx2.AsyncClient(base_url=p.base) as http:
            got = await http.get(f"/ipfs/{root}")
        assert got.status_code == 200 and got.content == data  # B serves the whole file from the pushed blocks


async def test_the_worker_beside_the_engine_delivers_after_a_commit(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        p.a.sync.pusher.poll_interval_s = 0.05
        async with p.a.engine_running(), Client(build_server(p.a)) as client:
            await call(
                client,
                "write",
                {"address": f"hm://{p.alice.account_id}/live", "content": "# Live", "options": {"name": "Live"}},
            )
            with anyio.fail_after(20):
                while p.b.hypermedia.ref(p.alice.account_id, "/live") is None:
                    await anyio.sleep(0.05)
        assert pending(p.a) == 0


async def test_a_server_that_is_down_keeps_the_blobs_with_backoff(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        closed = harness_a(tmp_path / "a2", "http://127.0.0.1:9")  # discard port: nothing listens
        try:
            create_identity(closed, "Carol")
            t0 = now_ms() + 1_000  # an injected clock, past the enqueue time
            closed.sync.pusher.clock = lambda: t0
            owed = pending(closed)
            (report,) = await anyio.to_thread.run_sync(closed.sync.pusher.push_once)
            assert report.failed == owed and report.delivered == 0 and "127.0.0.1:9" in report.errors[0]
            (backlog,) = closed.sync.queue.backlog()
            assert backlog.pending == owed and backlog.attempts == 1 and backlog.due_at == t0 + 1_000
            (again,) = await anyio.to_thread.run_sync(closed.sync.pusher.push_once)
            assert again.failed == 0 and again.delivered == 0  # not due before the backoff ran out
            closed.sync.pusher.clock = lambda: t0 + 1_000
            await anyio.to_thread.run_sync(closed.sync.pusher.push_once)
            assert closed.sync.queue.backlog()[0].due_at == t0 + 1_000 + 2_000  # doubled
        finally:
            closed.close()
        assert p.base


async def test_a_wrong_token_is_retried_not_dropped(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        p.a.secrets.set(p.a.account_id, "seed-b", b"wrong")
        (report,) = await anyio.to_thread.run_sync(p.a.sync.pusher.push_once)
        assert report.failed and not report.refused and "401" in report.errors[0]
        assert pending(p.a) == report.failed


async def test_a_refused_blob_is_set_aside_reported_and_put_back_by_hm_push(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        with p.a.db.transaction() as conn:  # a blob damaged at rest: B must refuse it, and does
            cid, data = conn.execute("SELECT cid, data FROM hm_blobs WHERE type = 'Profile'").fetchone()
            damaged = bytearray(data)
            damaged[-3] ^= 0xFF
            conn.execute("UPDATE hm_blobs SET data = ? WHERE cid = ?", (bytes(damaged), cid))
        (report,) = await anyio.to_thread.run_sync(p.a.sync.pusher.push_once)
        assert report.refused == 1 and cid in report.errors[-1]  # only the blob B named; the rest went through
        assert report.delivered >= 3 and pending(p.a) == 0
        (backlog,) = p.a.sync.queue.backlog()
        assert backlog.refused == 1 and backlog.pending == 0
        assert p.b.hypermedia.ref(p.alice.account_id, "") is not None  # the home document arrived regardless
        code, out = await _cli(p, tmp_path / "a", "hm", "status")
        (row,) = json.loads(out)
        assert code == 0 and row["refused"] == report.refused and "refused" in row["lastError"]
        assert PushQueue(p.a.db).retry_refused() == report.refused
        assert p.a.sync.queue.backlog()[0].pending == report.refused


async def test_hm_push_owes_a_whole_document_again(tmp_path: Path) -> None:
    async with pair(tmp_path, auto_push=False) as p:
        doc = f"hm://{p.alice.account_id}/manual"
        async with Client(build_server(p.a)) as client:
            wrote = await call(client, "write", {"address": doc, "content": "# Manual", "options": {"name": "Manual"}})
            await call(client, "write", {"address": doc, "content": "Noted.", "options": {"action": "comment"}})
        assert wrote["push"] == [{"server": p.base, "autoPush": False, "pending": 0}]
        code, out = await _cli(p, tmp_path / "a", "hm", "push", doc, auto_push=False)
        assert code == 0, out
        result = json.loads(out)
        assert result["queued"] == 4  # genesis, change, ref, comment
        assert result["servers"] == [{"server": p.base, "delivered": 4, "pending": 0}]
        assert p.b.hypermedia.document(p.alice.account_id, "/manual").name == "Manual"
        assert p.b.hypermedia.comment_count(p.alice.account_id, "/manual") == 1


async def _cli(p: Pair, data_dir: Path, *args: str, auto_push: bool = True) -> tuple[int, str]:
    """Run `mcp-harness` on A's data dir with a config naming B, off the loop (B answers on it)."""
    config = data_dir.parent / "a.toml"
    config.write_text(
        f'[web]\nallow_hosts = ["127.0.0.1"]\n\n[[hypermedia.servers]]\nurl = "{p.base}"\n'
        f'token_secret = "seed-b"\nauto_push = {"true" if auto_push else "false"}\n'
    )
    out = io.StringIO()

    def run() -> int:
        with contextlib.redirect_stdout(out):
            return main([*args, "--data-dir", str(data_dir), "--config", str(config), "--json"])

    code = await anyio.to_thread.run_sync(run)
    return code, out.getvalue()
