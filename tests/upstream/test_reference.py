"""The reference servers no one here wrote, mounted behind `call` (issue 20 "How it is checked"):
`@modelcontextprotocol/server-filesystem` and `server-memory` over stdio, `server-everything` over Streamable HTTP
(its progress, images and errors), each result compared with what the same server answers a direct client."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call
from tests.upstream.conftest import EVERYTHING, FILESYSTEM, MEMORY, mounting

pytestmark = pytest.mark.anyio


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    """server-everything in its `streamableHttp` mode on a loopback port, for the module."""
    port = _free_port()
    process = subprocess.Popen(
        ["node", str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("server-everything exited at start") from None
                import time

                time.sleep(0.025)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("files").resolve()
    (root / "notes.md").write_text("# Notes\n\nremember the milk\n")
    return root


@pytest.fixture(scope="module")
def reference_harness(tmp_path_factory: pytest.TempPathFactory, files: Path, everything_url: str) -> Iterator[Harness]:
    home = tmp_path_factory.mktemp("reference")
    h = mounting(
        home,
        [
            {"name": "fs", "command": ["node", str(FILESYSTEM), str(files)]},
            {"name": "memory", "command": ["node", str(MEMORY)], "env": {"MEMORY_FILE_PATH": str(home / "m.jsonl")}},
            {"name": "everything", "url": everything_url},
        ],
    )
    yield h
    h.close()


@pytest.fixture(scope="module")
async def client(reference_harness: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(reference_harness), mode="legacy") as c:
        yield c


def blocks(result: Any) -> list[dict[str, Any]]:
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]


async def test_the_filesystem_server_reads_a_file_as_a_direct_client_would(client: Client, files: Path) -> None:
    listing = await call(client, "read", {"address": "~/tools/"})
    assert {"mcp__fs__read_text_file", "mcp__memory__read_graph", "mcp__everything__echo"} <= set(listing["tools"])
    path = str(files / "notes.md")
    ours = await client.call_tool("call", {"tool": "mcp__fs__read_text_file", "input": {"path": path}})
    from mcp.client.stdio import StdioServerParameters

    async with Client(StdioServerParameters(command="node", args=[str(FILESYSTEM), str(files)])) as direct:
        theirs = await direct.call_tool("read_text_file", {"path": path})
    assert blocks(ours) == blocks(theirs) and "remember the milk" in blocks(ours)[0]["text"]
    assert ours.structured_content == theirs.structured_content
    miss = await call(client, "call", {"tool": "mcp__fs__read_text_file", "input": {"file": path}})
    assert "$: 'path' is a required property" in miss["validationErrors"]


async def test_the_memory_server_keeps_a_graph(client: Client) -> None:
    entity = {"name": "milk", "entityType": "grocery", "observations": ["buy it"]}
    await call(client, "call", {"tool": "mcp__memory__create_entities", "input": {"entities": [entity]}})
    graph = await call(client, "call", {"tool": "mcp__memory__read_graph", "input": {}})
    assert [e["name"] for e in graph["entities"]] == ["milk"]


async def test_the_everything_server_over_http_relays_progress(client: Client) -> None:
    seen: list[str | None] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    tool = {"tool": "mcp__everything__trigger-long-running-operation", "input": {"duration": 0.3, "steps": 3}}
    result = await client.call_tool("call", tool, progress_callback=progress)
    assert not result.is_error and "Long running operation completed" in blocks(result)[0]["text"]
    assert seen == ["everything: 1/3", "everything: 2/3", "everything: 3/3"]


async def test_the_everything_server_sends_its_image_unchanged(client: Client) -> None:
    result = await client.call_tool("call", {"tool": "mcp__everything__get-tiny-image", "input": {}})
    images = [b for b in blocks(result) if b["type"] == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png"
    assert base64.b64decode(images[0]["data"]).startswith(b"\x89PNG")


async def test_the_everything_servers_errors_stay_errors(client: Client, reference_harness: Harness) -> None:
    bad = {"name": "x.gz", "data": "http://127.0.0.1:9/nothing", "outputType": "resource"}
    result = await client.call_tool("call", {"tool": "mcp__everything__gzip-file-as-resource", "input": bad})
    assert result.is_error
    session = reference_harness.sessions.list(reference_harness.account_id)[0]
    logged = reference_harness.sessions.events(session.id)[-1].payload["output"]
    assert logged["isError"] is True and logged["text"].startswith("MCP server everything reported an error")


async def test_the_everything_servers_resources_are_readable(client: Client) -> None:
    listing = await call(client, "read", {"address": "mcp://everything/"})
    uri = listing["resources"][0]["uri"]
    with anyio.fail_after(20):
        read = await call(client, "read", {"address": f"mcp://everything/{uri}"})
    assert read["uri"] == uri and read["contents"][0]["text"]
