"""MCP resources: fixed resources, memory paging, templates, and reads that mirror the read verb."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_harness.addresses import memory_uri
from mcp_harness.harness import Harness
from mcp_harness.resources import catalog
from mcp_harness.resources.catalog import encode_cursor
from mcp_harness.server import build_server
from tests.conftest import call

pytestmark = pytest.mark.anyio


async def test_templates_cover_the_readable_addresses(client: Client) -> None:
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == [
        "harness://memory/{path}",
        "harness://tools/{name}",
        "harness://triggers/{name}",
        "thread:{id}",
        "run:{id}",
        "hm://{account}/{path}",
        "ipfs://{cid}",
    ]


async def test_resources_list_pages_through_memory_files(client: Client, harness: Harness, monkeypatch: Any) -> None:
    monkeypatch.setattr(catalog, "PAGE_SIZE", 100)
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


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


MALFORMED_CURSORS = [
    *("-1", "-100", "abc", "1.5", " 100", "100 ", "+100", "1_00", "0x10", "01", "９"),
    "100",  # the offsets of earlier versions: a cursor now names a path
    "after:",
    "after:!!",
    "after:" + _b64(b"notes.md") + "=",  # padded: not the spelling this server writes
    "after:" + _b64(b"../etc/passwd"),
    "after:" + _b64(b"a//b.md"),  # not a normalized path
    "after:" + _b64(b"\xff\xfe"),  # not UTF-8
    "AFTER:" + _b64(b"notes.md"),
]


@pytest.mark.parametrize("cursor", MALFORMED_CURSORS)
async def test_a_malformed_cursor_is_invalid_params(client: Client, cursor: str) -> None:
    with pytest.raises(MCPError) as info:
        await client.list_resources(cursor=cursor)
    assert info.value.code == -32602
    assert info.value.message.startswith(f"Invalid cursor {cursor!r}: pass back the nextCursor")
    past = await client.list_resources(cursor=encode_cursor("zzzz.md"))  # past the end is just an empty page
    assert (past.resources, past.next_cursor) == ([], None)


TRICKY_TREE = [  # plain string order puts "a-b/x" and "a.txt" before "a/x", and "a0" after all of a/
    "a-b/x",
    "a.txt",
    "a/x",
    "a/y/z.md",
    "a0",
    "ab/c/d.txt",
    "b b/é.txt",
    "z/" + "/".join(["d"] * 14) + "/deep.txt",  # depth 16: still addressable
]


def _plant(root: Path) -> list[str]:
    """TRICKY_TREE plus things resources never offer: an empty directory, a symlink, a name no address can carry,
    and a file too deep to address. Returns the files an address can name, in plain string order."""
    for rel in TRICKY_TREE:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel, encoding="utf-8")
    (root / "empty").mkdir()
    os.symlink(root / "a.txt", root / "link.txt")
    os.makedirs(root / "z" / "/".join(["d"] * 16))
    (root / "z" / "/".join(["d"] * 16) / "too-deep.txt").write_text("x")
    os.mkdir(os.fsencode(root) + b"/bad\xffdir")
    with open(os.fsencode(root) + b"/bad\xffdir/f.txt", "wb") as fh:
        fh.write(b"x")
    return sorted(TRICKY_TREE)


async def _all_memory_uris(c: Client, forget: Any = None) -> list[str]:
    uris: list[str] = []
    cursor: str | None = None
    while True:
        if forget is not None:
            forget()
        page = await c.list_resources(cursor=cursor) if cursor else await c.list_resources()
        uris += [r.uri for r in page.resources if r.uri.startswith("harness://memory/")]
        cursor = page.next_cursor
        if cursor is None:
            return uris


@pytest.mark.parametrize("cached", [True, False], ids=["one-walk", "resumed-from-cursor"])
async def test_pages_resume_the_walk_in_path_order(harness: Harness, cached: bool, monkeypatch: Any) -> None:
    """Every addressable file once, in path order, whether the walk paused in the server continues or the cursor
    alone resumes it (another process, or the walk evicted)."""
    root = harness.agent().memory_dir
    root.mkdir(parents=True, exist_ok=True)
    expected = _plant(root)
    monkeypatch.setattr(catalog, "PAGE_SIZE", 3)  # a page boundary between most neighbours
    store = harness.memory(harness.agent())
    async with Client(build_server(harness)) as c:
        got = await _all_memory_uris(c, None if cached else store._walks.clear)  # pyright: ignore[reportPrivateUsage]
    assert got == [memory_uri(p) for p in expected]


async def test_a_cursor_survives_its_file_and_directory_going_away(harness: Harness, monkeypatch: Any) -> None:
    root = harness.agent().memory_dir
    root.mkdir(parents=True, exist_ok=True)
    expected = _plant(root)
    store = harness.memory(harness.agent())
    first, cursor = store.files_page(None, 3)
    assert [e.path for e in first] == expected[:3] and cursor == "a/x"
    (root / "a" / "x").unlink()
    store._walks.clear()  # pyright: ignore[reportPrivateUsage]
    second, _ = store.files_page(cursor, 2)
    assert [e.path for e in second] == expected[3:5]
    import shutil

    shutil.rmtree(root / "a")
    third, last = store.files_page("a/y/z.md", 100)
    assert [e.path for e in third] == expected[4:] and last is None


async def test_paging_through_every_resource_stats_each_file_once(harness: Harness, monkeypatch: Any) -> None:
    """resources/list used to walk (and stat) the whole tree for every page: O(n²) for the pages of n files."""
    root = harness.agent().memory_dir
    for d in range(10):
        os.makedirs(root / f"d{d}")
        for f in range(100):
            (root / f"d{d}" / f"f{f:03}.txt").write_bytes(b"x")
    stats = [0]
    real_stat = os.stat

    def counting(*args: Any, **kwargs: Any) -> Any:
        stats[0] += 1
        return real_stat(*args, **kwargs)

    async with Client(build_server(harness)) as c:
        await c.list_resources()  # the server warms up (agent, sessions) outside the count
        monkeypatch.setattr(os, "stat", counting)
        uris = await _all_memory_uris(c)
        monkeypatch.setattr(os, "stat", real_stat)
    assert len(uris) == 1000
    assert stats[0] <= 1100, f"{stats[0]} stats for 1000 files"


async def test_a_page_of_files_is_one_request_up_to_the_page_size(client: Client, harness: Harness) -> None:
    """1,000 files and the fixed resources fit two pages at the default size; each file says its size and type."""
    root = harness.agent().memory_dir
    os.makedirs(root / "d")
    for f in range(1000):
        (root / "d" / f"f{f:04}.md").write_bytes(b"x" * (f % 7))
    (root / "a.tar.gz").write_bytes(b"zz")
    (root / ".env").write_bytes(b"k=v")
    first = await client.list_resources()
    assert len(first.resources) == catalog.PAGE_SIZE and first.next_cursor is not None
    second = await client.list_resources(cursor=first.next_cursor)
    assert second.next_cursor is None
    memory = {r.uri: r for r in first.resources + second.resources if r.uri.startswith("harness://memory/")}
    assert len(memory) == 1002
    note = memory["harness://memory/d/f0012.md"]
    assert (note.name, note.size, note.mime_type) == ("d/f0012.md", 5, "text/markdown")
    tarball = memory["harness://memory/a.tar.gz"]
    assert (tarball.size, tarball.mime_type) == (2, "application/x-tar")
    assert memory["harness://memory/.env"].mime_type is None


async def test_a_page_of_long_names_stops_at_its_byte_budget(harness: Harness, monkeypatch: Any) -> None:
    """Pages end at `PAGE_BYTES` of paths (at least one file each), and every file is still listed once."""
    root = harness.agent().memory_dir
    root.mkdir(parents=True, exist_ok=True)
    names = [f"{i:02}-" + "n" * 200 for i in range(30)]
    for name in names:
        (root / name).write_bytes(b"x")
    monkeypatch.setattr(catalog, "PAGE_BYTES", 1000)  # four such paths (plus their overhead) a page
    sizes: list[int] = []
    uris: list[str] = []
    cursor: str | None = None
    async with Client(build_server(harness)) as c:
        while True:
            page = await c.list_resources(cursor=cursor) if cursor else await c.list_resources()
            files = [r.uri for r in page.resources if r.uri.startswith("harness://memory/")]
            sizes.append(len(files))
            uris += files
            cursor = page.next_cursor
            if cursor is None:
                break
        monkeypatch.setattr(catalog, "PAGE_BYTES", 10)  # less than one path: a page still holds one file
        one = await c.list_resources(cursor=encode_cursor(names[0]))
    assert uris == [memory_uri(n) for n in names]
    assert max(sizes) == 3 and len(sizes) == 10
    assert len(one.resources) == 1 and one.resources[0].uri == memory_uri(names[1]) and one.next_cursor


@pytest.mark.parametrize("cached", [True, False], ids=["one-walk", "resumed-from-cursor"])
async def test_files_added_and_removed_between_pages(harness: Harness, cached: bool, monkeypatch: Any) -> None:
    """A file that stays is listed exactly once; one removed before its page is not listed; one added after the
    cursor's place is listed when the walk has not yet read its directory (or resumes from the cursor)."""
    root = harness.agent().memory_dir
    for d in ("a", "b", "c"):
        os.makedirs(root / d)
        for f in range(10):
            (root / d / f"{f}.txt").write_bytes(b"x")
    monkeypatch.setattr(catalog, "PAGE_SIZE", 7)
    store = harness.memory(harness.agent())
    async with Client(build_server(harness)) as c:
        first = await c.list_resources()
        (root / "a" / "0.txt").unlink()  # before the cursor: already listed
        (root / "b" / "5.txt").unlink()  # after it: never listed
        (root / "c" / "55.txt").write_bytes(b"new")  # after it, in a directory not yet read
        (root / "a" / "-.txt").write_bytes(b"new")  # before it: not listed ("-.txt" sorts before "0.txt")
        if not cached:
            store._walks.clear()  # pyright: ignore[reportPrivateUsage]
        rest: list[str] = []
        cursor = first.next_cursor
        while cursor is not None:
            page = await c.list_resources(cursor=cursor)
            rest += [r.uri for r in page.resources]
            cursor = page.next_cursor
    listed = [r.uri for r in first.resources if r.uri.startswith("harness://memory/")] + rest
    assert len(listed) == len(set(listed))
    stayed = {memory_uri(f"{d}/{f}.txt") for d in "abc" for f in range(10)} - {memory_uri("b/5.txt")}
    assert stayed <= set(listed) and memory_uri("b/5.txt") not in listed
    assert memory_uri("c/55.txt") in listed and memory_uri("a/-.txt") not in listed
