"""MCP resources: fixed resources, memory paging, templates, and reads that mirror the read verb."""

from __future__ import annotations

import base64

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_harness.harness import Harness
from tests.conftest import call

pytestmark = pytest.mark.anyio


async def test_templates_cover_the_readable_addresses(client: Client) -> None:
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == [
        "harness://memory/{path}",
        "harness://tools/{name}",
        "thread:{id}",
        "hm://{account}/{path}",
    ]


async def test_resources_list_pages_through_memory_files(client: Client, harness: Harness) -> None:
    root = harness.agent().memory_dir
    root.mkdir(parents=True, exist_ok=True)
    for i in range(150):
        (root / f"f{i:03}.txt").write_text(str(i), encoding="utf-8")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await client.list_resources(cursor=cursor) if cursor else await client.list_resources()
        pages += 1
        seen += [r.uri for r in page.resources]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 2
    assert seen[:2] == ["harness://self", "harness://plan"]
    memory = [u for u in seen if u.startswith("harness://memory/")]
    assert memory == [f"harness://memory/f{i:03}.txt" for i in range(150)]
    assert "harness://tools/delegate" in seen


async def test_resource_reads(client: Client, harness: Harness) -> None:
    await call(client, "write", {"address": "~/memory/notes/a b.md", "content": "# Title"})
    root = harness.agent().memory_dir
    (root / "raw.bin").write_bytes(b"\x00\x01\x02")
    text = (await client.read_resource("harness://memory/notes/a%20b.md")).contents[0]
    assert isinstance(text, types.TextResourceContents) and text.text == "# Title" and text.mime_type == "text/markdown"
    blob = (await client.read_resource("harness://memory/raw.bin")).contents[0]
    assert isinstance(blob, types.BlobResourceContents) and base64.b64decode(blob.blob) == b"\x00\x01\x02"
    listing = (await client.read_resource("harness://memory/notes/")).contents[0]
    assert isinstance(listing, types.TextResourceContents) and '"notes/a b.md"' in listing.text
    contract = (await client.read_resource("harness://tools/plan")).contents[0]
    assert isinstance(contract, types.TextResourceContents) and contract.text.startswith("# plan")
    me = (await client.read_resource("harness://self")).contents[0]
    assert isinstance(me, types.TextResourceContents) and "assistant" in me.text
    session = harness.sessions.list(harness.account_id)[0]
    transcript = (await client.read_resource(f"thread:{session.id}")).contents[0]
    assert isinstance(transcript, types.TextResourceContents) and "tool call write" in transcript.text


async def test_unknown_resources_are_protocol_errors(client: Client) -> None:
    for uri in ("harness://memory/missing.txt", "hm://z6Mk/doc", "harness://nothing"):
        with pytest.raises(MCPError) as info:
            await client.read_resource(uri)
        assert info.value.code in (-32002, -32602)
