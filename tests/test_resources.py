"""MCP resources: fixed resources, memory paging, templates, and reads that mirror the read verb."""

from __future__ import annotations

import base64

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
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


@pytest.mark.parametrize(("mode", "code"), [("legacy", -32002), ("2026-07-28", -32602)])
async def test_a_missing_resource_is_the_eras_not_found_error(harness: Harness, mode: str, code: int) -> None:
    """2026-07-28 (server/resources): servers MUST answer -32602 with data.uri; 2025-11-25 and before: -32002."""
    async with Client(build_server(harness), mode=mode) as c:
        for uri in ("harness://memory/missing.txt", "harness://memory/gone/", "thread:nope", "harness://nothing"):
            with pytest.raises(MCPError) as info:
                await c.read_resource(uri)
            assert (info.value.code, info.value.data) == (code, {"uri": uri}), info.value.message
        with pytest.raises(MCPError) as info:
            await c.read_resource("harness://memory/a%00b")  # a bad path, not a missing resource
        assert info.value.code == -32602 and "invalid character" in info.value.message


@pytest.mark.parametrize("cursor", ["-1", "-100", "abc", "1.5", " 100", "100 ", "+100", "1_00", "0x10", "01", "９"])
async def test_a_negative_or_malformed_cursor_is_invalid_params(client: Client, cursor: str) -> None:
    with pytest.raises(MCPError) as info:
        await client.list_resources(cursor=cursor)
    assert info.value.code == -32602
    assert info.value.message.startswith(f"Invalid cursor {cursor!r}: pass back the nextCursor")
    assert (await client.list_resources(cursor="100")).resources == []  # past the end is just an empty page
