"""Bounded memory reads (issue 13.7, 15.2): files in pages of at most 200 KiB, listings in pages with a cursor, a
large body sent once, options refused by name, and a `~/self` summary that never walks a whole big tree."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.memory import listing
from mcp_harness.spaces.memory import INLINE_BYTES, MAX_PAGE_BYTES, MAX_PAGE_WIRE_BYTES, page_window
from tests.conftest import call, refused, text_of

pytestmark = pytest.mark.anyio


def _root(harness: Harness) -> Path:
    root = harness.agent().memory_dir
    root.mkdir(parents=True, exist_ok=True)
    return root


async def _read_all(c: Client, address: str) -> tuple[str, list[dict[str, Any]]]:
    """Read a file page by page through `nextOffset`; the content of each page is the text block's first `length`
    characters when `contentInText`, else `data.content`. Returns the whole text and every page's data."""
    parts: list[str] = []
    pages: list[dict[str, Any]] = []
    options: dict[str, Any] = {}
    while True:
        result = await c.call_tool("read", {"address": address, "options": options})
        assert not result.is_error, result.content
        data = result.structured_content
        assert isinstance(data, dict)
        pages.append(data)
        text = text_of(result)
        if data.get("contentInText"):
            assert "content" not in data
            parts.append(text[: data["length"]])
        else:
            parts.append(data["content"])
            assert text.startswith(data["content"])
        if "nextOffset" not in data:
            return "".join(parts), pages
        options = {"offset": data["nextOffset"]}


async def test_a_large_file_reads_in_bounded_pages_sent_once(client: Client, harness: Harness) -> None:
    body = "".join(f"line {i}: é — 😀\n" for i in range(30_000))  # ≈ 690 KB, with 2-, 3- and 4-byte characters
    (_root(harness) / "big.txt").write_text(body, encoding="utf-8")
    whole, pages = await _read_all(client, "~/memory/big.txt")
    assert whole == body
    assert len(pages) == 4
    first = pages[0]
    assert first["totalChars"] == len(body) and first["size"] == len(body.encode("utf-8"))
    assert (first["offset"], first["nextOffset"]) == (0, first["length"])
    assert first["contentInText"] is True
    assert first["summary"].startswith(f"Read characters 0–{first['length']} of big.txt ({len(body)} characters")
    assert f"read again with options {{offset: {first['length']}}}" in first["notice"]
    assert "a page holds at most 200 KiB" in first["notice"]
    for page in pages:
        page_text = body[page["offset"] : page["offset"] + page["length"]]
        assert len(page_text.encode("utf-8")) <= MAX_PAGE_BYTES
    assert "nextOffset" not in pages[-1] and "notice" not in pages[-1]


async def test_offsets_are_characters_and_no_page_splits_one(client: Client, harness: Harness) -> None:
    body = "aé😀" * 40_000  # 7 bytes a round: the 200 KiB bound falls inside a character
    (_root(harness) / "mb.txt").write_text(body, encoding="utf-8")
    first = await call(client, "read", {"address": "~/memory/mb.txt"})
    kept = body[: first["length"]].encode("utf-8")
    assert MAX_PAGE_BYTES - 4 < len(kept) <= MAX_PAGE_BYTES
    assert MAX_PAGE_BYTES % 7 != 0 and first["length"] % 3 != 0  # the cut is mid-round, on a character boundary
    whole, _ = await _read_all(client, "~/memory/mb.txt")
    assert whole == body
    small = await call(client, "read", {"address": "~/memory/mb.txt", "options": {"offset": 1, "length": 2}})
    assert small["content"] == "é😀" and (small["offset"], small["length"], small["nextOffset"]) == (1, 2, 3)
    tail = await call(client, "read", {"address": "~/memory/mb.txt", "options": {"offset": len(body) - 1}})
    assert tail["content"] == "😀" and "nextOffset" not in tail
    end = await call(client, "read", {"address": "~/memory/mb.txt", "options": {"offset": len(body)}})
    assert end["content"] == "" and end["length"] == 0


async def test_small_reads_carry_the_content_in_both_and_totals(client: Client) -> None:
    await call(client, "write", {"address": "~/memory/n.md", "content": "héllo"})
    result = await client.call_tool("read", {"address": "~/memory/n.md"})
    data = result.structured_content
    assert data is not None and text_of(result) == "héllo" == data["content"]
    assert (data["totalChars"], data["size"], data["offset"], data["length"]) == (5, 6, 0, 5)
    assert data["summary"] == "Read n.md (6 bytes)." and "nextOffset" not in data and "contentInText" not in data


async def test_the_inline_threshold_and_the_json_format(client: Client, harness: Harness) -> None:
    (_root(harness) / "at.txt").write_text("x" * INLINE_BYTES)
    (_root(harness) / "over.txt").write_text("x" * (INLINE_BYTES + 1))
    assert (await call(client, "read", {"address": "~/memory/at.txt"}))["content"] == "x" * INLINE_BYTES
    over = await client.call_tool("read", {"address": "~/memory/over.txt", "format": "json"})
    data = over.structured_content
    assert data is not None and data["contentInText"] is True and "content" not in data
    assert json.loads(text_of(over))["content"] == "x" * (INLINE_BYTES + 1)


def test_control_characters_cannot_swell_a_page_past_the_wire_bound() -> None:
    """Escape codes are one byte on disk and six in JSON (`\\u001b`): the page shrinks so the message stays small."""
    text = "\x1b[31m" * 100_000
    window, cut = page_window(text, 0, None)
    assert cut and len(json.dumps(window, ensure_ascii=False).encode("utf-8")) <= MAX_PAGE_WIRE_BYTES
    assert text.startswith(window) and len(window) > MAX_PAGE_WIRE_BYTES // 8


async def test_read_options_are_refused_by_name(client: Client) -> None:
    await call(client, "write", {"address": "~/memory/d/f.txt", "content": "abc"})

    async def message(address: str, options: Any) -> str:
        return (await refused(client, "read", {"address": address, "options": options}))["message"]

    assert await message("~/memory/d/f.txt", {"bogus": 1, "offest": 2}) == (
        'read ~/memory/<path> does not understand options "bogus", "offest". Supported options: offset, length, '
        "cursor, limit."
    )
    assert (await message("~/memory/d/", {"offset": 1})).startswith(
        'read ~/memory/<directory>/ does not understand option "offset". Supported options: cursor, limit. '
        "offset and length page a file"
    )
    assert (await message("~/memory/d/f.txt", {"cursor": "d/f.txt"})).startswith("d/f.txt is a file: page it with")
    assert (await message("~/memory/d", {"length": 5})).startswith("d is a directory: page its listing with")
    for bad in (-1, "3", True, 1.5):
        assert "read option offset must be an integer >= 0" in await message("~/memory/d/f.txt", {"offset": bad})
    assert "read option length must be an integer >= 1" in await message("~/memory/d/f.txt", {"length": 0})
    assert await message("~/memory/d/f.txt", {"offset": 4}) == (
        "read option offset 4 is past the end of d/f.txt (3 characters)."
    )
    for bad in (0, 501, "10"):
        assert "read option limit must be an integer from 1 to 500" in await message("~/memory/", {"limit": bad})
    assert "the path of an entry of d/" in await message("~/memory/d/", {"cursor": "elsewhere/f.txt"})
    assert "the path of an entry of the memory root" in await message("~/memory/", {"cursor": 3})
    assert await message("~/self", {"verbose": True}) == (
        'read ~/self does not understand option "verbose". Supported options: (none).'
    )


async def test_a_listing_pages_with_a_cursor_and_stats_only_its_page(
    client: Client, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _root(harness)
    for i in range(250):
        (root / f"f{i:03}.txt").write_bytes(b"x" * i)
    for name in ("da", "db", "dc"):
        (root / name).mkdir()
        (root / name / "inner.txt").write_text("1")
    stats = [0]
    real_stat = os.stat

    def counting(*args: Any, **kwargs: Any) -> Any:
        stats[0] += 1
        return real_stat(*args, **kwargs)

    await call(client, "read", {"address": "~/self"})  # the session exists before counting
    monkeypatch.setattr(os, "stat", counting)
    first = await call(client, "read", {"address": "~/memory/"})
    monkeypatch.setattr(os, "stat", real_stat)
    assert stats[0] <= 110, f"{stats[0]} stats for a page of 100"
    assert len(first["entries"]) == 100 and first["totalEntries"] == 253
    assert first["nextCursor"] == first["entries"][-1]["path"] == "f096.txt" and first["remaining"] == 153
    assert first["summary"] == (
        "Memory root holds 250 files and 3 directories; entries 1–100 are listed here. 153 more: read again with "
        'options {cursor: "f096.txt"}.'
    )
    assert "totalBytes" not in first and first["pageBytes"] == sum(range(97))
    seen = [e["path"] for e in first["entries"]]
    cursor = first["nextCursor"]
    while cursor is not None:
        page = await call(client, "read", {"address": "~/memory", "options": {"cursor": cursor, "limit": 60}})
        assert len(page["entries"]) <= 60
        seen += [e["path"] for e in page["entries"]]
        cursor = page.get("nextCursor")
    assert seen == sorted(["da", "db", "dc", *(f"f{i:03}.txt" for i in range(250))])
    inner = await call(client, "read", {"address": "~/memory/da/", "options": {"limit": 1}})
    assert inner["summary"] == "da/ holds 1 file (1 bytes)." and inner["totalBytes"] == 1


async def test_self_counts_a_big_tree_within_a_bound(
    client: Client, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _root(harness)
    for d in range(4):
        os.makedirs(root / f"dir{d}" / "sub")
        for f in range(30):
            (root / f"dir{d}" / "sub" / f"{f}.txt").write_bytes(b"ab")
    for f in range(6):
        (root / f"top{f}.txt").write_text("t")
    monkeypatch.setattr(listing, "SUMMARY_WALK", 70)  # visits dir0 (31), dir1 (31), 8 entries of dir2
    monkeypatch.setattr(listing, "SUMMARY_SHOWN", 8)
    me = await call(client, "read", {"address": "~/self"})
    assert me["memory"] == {
        "totalFiles": 6 + 30 + 30 + 7,
        "topLevel": [
            "dir0/ (30 files, 60 bytes)",
            "dir1/ (30 files, 60 bytes)",
            "dir2/ (≥ 7 files, ≥ 14 bytes)",
            "dir3/ (not counted)",
            "top0.txt",
            "top1.txt",
            "top2.txt",
            "top3.txt",
        ],
        "totalFilesAtLeast": True,
        "moreTopLevel": 2,
    }
    text = text_of(await client.call_tool("read", {"address": "~/self"}))
    assert "## Memory (≥ 73 files)" in text and "- … and 2 more (read ~/memory/ to page through them)" in text


async def test_a_listing_counts_each_directory_it_lists_within_a_bound(
    client: Client, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _root(harness)
    (root / "big").mkdir()
    for i in range(5):
        (root / "big" / f"{i}.txt").write_text("x")
    (root / "small").mkdir()
    (root / "small" / "one.txt").write_text("x")
    monkeypatch.setattr(listing, "ENTRY_COUNT_BOUND", 3)
    result = await client.call_tool("read", {"address": "~/memory/"})
    data = result.structured_content
    assert data is not None
    big, small = data["entries"]
    assert (big["entryCount"], big["entryCountAtLeast"]) == (3, True)
    assert small["entryCount"] == 1 and "entryCountAtLeast" not in small
    assert "- big/ (≥ 3 entries)" in text_of(result) and "- small/ (1 entry)" in text_of(result)
