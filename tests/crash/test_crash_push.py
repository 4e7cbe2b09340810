"""The durable push queue survives `kill -9` (issue 19): a real `serve --http` owes a backlog of published blobs to
a Seed server (another harness process). While that server is down the push fails and is retried with backoff; the
process is killed then, restarted with the server up, killed again mid-backlog, and restarted: in the end every
blob it published is on the server and the queue is drained.

The queue rows are written in the publish's own transaction and deleted only once the server acknowledged them, so
whatever moment a kill lands on, a blob is either still owed or already delivered (delivering twice is harmless:
a server keeps one copy of a content-addressed blob). Nothing asserts on timing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity, load_keypair
from tests.crash.crashkit import query, until
from tests.hypermedia.activity_kit import create
from tests.hypermedia.nodekit import config_file, free_port, serve_http

pytestmark = pytest.mark.anyio

DOCUMENTS = 240
TOKEN_A, TOKEN_B = "crash-a", "crash-b"


def _owed(db: Path) -> int:
    return int(query(db, "SELECT COUNT(*) FROM hm_push_queue")[0][0])


async def test_the_push_queue_survives_kill_9_and_drains_once_the_server_is_up(tmp_path: Path) -> None:
    port = free_port()
    config_a = config_file(
        tmp_path / "a.toml",
        f'[web]\nallow_hosts = ["127.0.0.1"]\n\n[[hypermedia.servers]]\nurl = "http://127.0.0.1:{port}"\n'
        'token_secret = "seed-b"\n',
    )
    config_b = config_file(tmp_path / "b.toml", "[hypermedia]\npublic = true\n")
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_db, b_db = a_dir / "harness.db", b_dir / "harness.db"
    harness = Harness(load_settings(config_a, data_dir=a_dir))
    try:  # the backlog: every publish owes its blobs to B in its own commit
        harness.secrets.set(harness.account_id, "seed-b", TOKEN_B.encode())
        key = load_keypair(harness, create_identity(harness, "Alice").name)
        for i in range(DOCUMENTS):
            create(harness.hypermedia, key, f"/d{i:03}", f"Document {i}.", name=f"D{i}")
    finally:
        harness.close()
    published = {r["cid"] for r in query(a_db, "SELECT cid FROM hm_blobs")}
    assert _owed(a_db) == len(published)

    # 1. B is down: the push fails, the rows stay with a retry time; then kill -9.
    async with serve_http(a_dir, config_a, TOKEN_A) as a:
        await until(
            lambda: bool(query(a_db, "SELECT 1 FROM hm_push_queue WHERE attempts > 0")), "a failed push", 60, a.log
        )
        await a.kill()
    assert _owed(a_db) == len(published)

    async with serve_http(b_dir, config_b, TOKEN_B, port) as b:
        # 2. B is up: killed again as soon as part of the backlog went through (or all of it, if it was quicker).
        async with serve_http(a_dir, config_a, TOKEN_A) as a:
            await until(lambda: _owed(a_db) < len(published), "a first delivery", 60, a.log)
            await a.kill()
        # 3. Restarted: it resumes the queue where the kill left it and drains it.
        async with serve_http(a_dir, config_a, TOKEN_A) as a:
            await until(lambda: _owed(a_db) == 0, "the queue drained", 120, a.log)
        assert b.base.endswith(f":{port}")
    on_b = {r["cid"] for r in query(b_db, "SELECT cid FROM hm_blobs")}
    assert published <= on_b  # every blob delivered
    documents = query(b_db, "SELECT COUNT(*) FROM hm_refs WHERE path LIKE '/d%'")[0][0]
    assert documents == DOCUMENTS
