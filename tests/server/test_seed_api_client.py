"""The official `@seed-hypermedia/client` against a live `serve --http` on loopback (issue 19 point 5, the JS half):
`mcp-harness serve` runs as a real process with a bearer token, and tests/js/seed_client_live.mjs reads our document,
comments and profile through `createSeedClient` (its zod schemas parse every answer), publishes a document and a
comment signed with its own key through its own builders, and sends a tampered blob, one under the wrong CID and a
Ref into a space it may not write.
Our `read hm://` over the same server then returns what it published, and the refused blobs were never stored."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity
from mcp_harness.identity.keys import KeyPair
from mcp_harness.server import build_server
from tests.conftest import call
from tests.js_oracle import run_js, verify_all_blobs
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio

TOKEN = "live-client-token"
DOC = (
    "---\nname: Field notes\nsummary: &s What we saw\nicon: *s\n---\n\n# Herons\n\nThree on the **river**, see "
    "[the map](https://example.org/map).\n\n- one\n- two\n\n1. first\n\n> quoted\n\n```py\nprint(1)\n```\n\n"
    "$$\nx^2\n$$\n\n"
    "| a | b |\n| --- | --- |\n| 1 | 2 |\n"
)
CLIENT_DOC = "---\nname: From the client\n---\n\nWritten by the official client."


async def _publish_ours(data_dir: Path) -> tuple[str, str]:
    """Alice's document and a comment on it, written through the MCP verbs: (document id, comment id)."""
    harness = Harness(load_settings(data_dir=data_dir))
    try:
        alice = create_identity(harness, "Alice")
        grant(harness, alice)
        doc = f"hm://{alice.account_id}/notes"
        async with Client(build_server(harness)) as client:
            await call(client, "write", {"address": doc, "content": DOC})
            made = await call(client, "write", {"address": doc, "content": "Lovely.", "options": {"action": "comment"}})
        return doc, made["id"]
    finally:
        harness.close()


@asynccontextmanager
async def _serve(data_dir: Path, tmp_path: Path) -> AsyncIterator[str]:
    """`mcp-harness serve --http 127.0.0.1:0` as a process, with one bearer token; yields its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "MCP_HARNESS_HTTP_TOKENS": TOKEN}
    command = [sys.executable, "-m", "mcp_harness", "serve", "--http", "127.0.0.1:0", "--data-dir", str(data_dir)]
    async with await anyio.open_process(command, env=env) as proc:
        assert proc.stderr is not None
        banner = b""
        with anyio.fail_after(60):
            while b"\n" not in banner:
                banner += await proc.stderr.receive()
        found = re.search(r"serving Streamable HTTP at (http://127\.0\.0\.1:\d+)/mcp", banner.decode())
        assert found is not None, banner
        try:
            yield found.group(1)
        finally:
            proc.send_signal(signal.SIGINT)
            with anyio.fail_after(30):
                assert await proc.wait() == 0


async def _read(base: str, address: str, **extra: Any) -> dict[str, Any]:
    transport = streamable_http_client(
        f"{base}/mcp", http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    )
    async with Client(transport, mode="legacy") as client:  # pyright: ignore[reportArgumentType]
        return await call(client, "read", {"address": address, **extra})


async def test_the_official_client_reads_publishes_and_is_refused_tampered_blobs(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    doc, comment = await _publish_ours(data_dir)
    uid = doc.removeprefix("hm://").split("/")[0]
    seed = KeyPair.generate().seed
    async with _serve(data_dir, tmp_path) as base:
        payload = {"base": base, "token": TOKEN, "doc": doc, "seed": seed.hex(), "markdown": CLIENT_DOC}
        out = await anyio.to_thread.run_sync(lambda: run_js("seed_client_live.mjs", payload))
        reads, published, refused = out["reads"], out["published"], out["refused"]
        # Reads: every answer passed the client's own output schema.
        assert reads["resource"]["type"] == "document" and reads["resource"]["name"] == "Field notes", reads
        assert reads["resource"]["texts"][0] == "Herons"
        assert reads["comments"] == {"texts": ["Lovely."], "authors": [uid]}
        assert reads["account"] == {"type": "account", "name": "Alice"}
        assert reads["metadata"] == {"name": "Field notes", "summary": "What we saw", "icon": "What we saw"}
        assert reads["changes"]["latestVersion"] == reads["resource"]["version"] and reads["changes"]["count"] >= 2
        assert "comment" in reads["events"]
        assert {"path": ["notes"], "name": "Field notes", "sortTime": True} in reads["children"]
        kinds = {"Heading", "Paragraph", "Code", "Math", "Table", "TableRow", "TableColumn"}
        assert kinds <= set(reads["resource"]["types"]), reads["resource"]  # each parsed by the client's block schemas
        assert reads["blob"] == "Change"
        # Publishing: the client's blobs went through PublishBlobs and read back through the API.
        account = published["account"]
        assert published["document"]["readBack"] == "From the client", published
        assert published["document"]["version"] in published["document"]["cids"]
        assert "error" not in published["comment"], published
        # Refusals: the client saw a 400 with our {"error"} message.
        for name in ("tampered", "wrongCid", "nonWriter"):
            assert refused[name]["status"] == 400, refused
            assert "HTTP 400 from PublishBlobs" in refused[name]["error"]
        # Our own read hm:// over the same live server returns what the client signed.
        theirs = await _read(base, f"hm://{account}/from-client", format="json")
        assert theirs["name"] == "From the client" and theirs["authors"] == [account]
        assert theirs["content"][0]["block"]["text"] == "Written by the official client."
        anonymous = await anyio.to_thread.run_sync(lambda: httpx2.get(f"{base}/api/Account?id={uid}"))
        assert anonymous.status_code == 401  # reads are not public here: the token is needed
        thread = await _read(base, f"{doc}/:comments")
        assert [c["id"] for c in thread["comments"]] == [comment, f"hm://{published['comment']['id']}"]
        assert thread["comments"][1]["markdown"] == "From the official client."
    harness = Harness(load_settings(data_dir=data_dir))
    try:
        assert harness.hypermedia.store.data(refused["tamperedCid"]) is None  # nothing of a refused batch is kept
        assert harness.hypermedia.ref(uid, "/intrusion") is None
        assert {"Change", "Ref", "Comment", "Profile"} <= verify_all_blobs(harness)
    finally:
        harness.close()
