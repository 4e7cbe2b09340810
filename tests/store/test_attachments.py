"""The attachment store: content-addressed bytes written atomically, the size limit enforced while streaming, the
200-a-conversation cap, and nothing left behind by a refused or failed upload."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from pathlib import Path

import pytest

from mcp_harness.errors import BadRequest, Conflict, TooLarge
from mcp_harness.harness import Harness
from mcp_harness.store.attachments import (
    CHUNK_BYTES,
    MAX_PER_SESSION,
    TEMP_DIR,
    check_id,
    clean_name,
)


def tiny_png(width: int = 2, height: int = 2) -> bytes:
    """A valid PNG (red pixels), built by hand so no imaging library is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def new_session(harness: Harness) -> str:
    return harness.sessions.create(harness.account_id, harness.agent().id).id


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


class Endless(io.RawIOBase):
    """A source that never ends, counting what was read from it."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        n = CHUNK_BYTES if size < 0 else size
        self.read_bytes += n
        return b"\x00" * n


def test_bytes_are_stored_once_by_sha256_and_each_session_holds_its_own_record(harness: Harness) -> None:
    one, two = new_session(harness), new_session(harness)
    png = tiny_png()
    store = harness.attachments
    first = store.add(one, "dir/photo.png", None, io.BytesIO(png))
    assert first.id == hashlib.sha256(png).hexdigest() and first.size == len(png)
    assert (first.name, first.mime_type, first.session_id) == ("photo.png", "image/png", one)
    assert store.path(first) == harness.data_dir / "attachments" / first.id[:2] / first.id
    assert store.path(first).read_bytes() == png
    again = store.add(one, "renamed.png", "image/png", io.BytesIO(png))
    assert again == first  # the same bytes in the same session: the record it has, first name kept
    other = store.add(two, "copy.png", None, io.BytesIO(png))
    assert other.session_id == two and store.path(other) == store.path(first)
    assert [p.name for p in files_under(store.root)] == [first.id]  # one file on disk for both sessions
    assert store.get(one, first.id) == first and store.get(two, first.id) == other
    assert store.get(two, "0" * 64) is None and store.list(one) == [first]


def test_the_type_comes_from_the_declaration_then_the_bytes_then_the_name(harness: Harness) -> None:
    session = new_session(harness)
    store = harness.attachments
    assert store.add(session, "a.txt", "text/plain; charset=utf-8", io.BytesIO(b"a")).mime_type == "text/plain"
    assert store.add(session, "b", "application/octet-stream", io.BytesIO(tiny_png(3))).mime_type == "image/png"
    assert store.add(session, "c.json", None, io.BytesIO(b"{}")).mime_type == "application/json"
    unnamed = store.add(session, None, None, io.BytesIO(b"\x00\x01"))
    assert unnamed.mime_type == "application/octet-stream" and unnamed.name == f"attachment-{unnamed.id[:12]}"


def test_a_source_over_the_limit_is_refused_while_streaming_and_leaves_nothing(harness: Harness) -> None:
    session = new_session(harness)
    source = Endless()
    limit = 3 * CHUNK_BYTES
    with pytest.raises(TooLarge) as refused:
        harness.attachments.add(session, "big.bin", None, source, max_bytes=limit)
    assert "nothing was stored" in refused.value.message
    # It stopped one byte past the limit: an endless source was never read (or written) further.
    assert source.read_bytes == limit + 1
    assert files_under(harness.attachments.root) == [] and harness.attachments.list(session) == []


def test_a_source_that_fails_midway_leaves_no_temp_file(harness: Harness) -> None:
    session = new_session(harness)

    class Broken(io.RawIOBase):
        calls = 0

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1, /) -> bytes:
            self.calls += 1
            if self.calls > 2:
                raise OSError("the disk went away")
            return b"x" * 10

    with pytest.raises(OSError, match="the disk went away"):
        harness.attachments.add(session, "x", None, Broken())
    assert files_under(harness.attachments.root / TEMP_DIR) == []


def test_a_session_holds_at_most_200_attachments(harness: Harness) -> None:
    session = new_session(harness)
    with harness.db.transaction() as conn:  # 199 rows as earlier uploads left them (no need to write 199 files)
        conn.executemany(
            "INSERT INTO attachments (session_id, id, name, mime_type, size, created_at) VALUES (?, ?, ?, ?, 1, 0)",
            [(session, f"{i:064x}", f"f{i}", "text/plain") for i in range(MAX_PER_SESSION - 1)],
        )
    last = harness.attachments.add(session, "last.txt", None, io.BytesIO(b"the 200th"))
    assert harness.attachments.count(session) == MAX_PER_SESSION and last.name == "last.txt"
    with pytest.raises(Conflict, match="already holds 200 attachments"):
        harness.attachments.add(session, "one-more.txt", None, io.BytesIO(b"the 201st"))
    assert harness.attachments.add(new_session(harness), "elsewhere.txt", None, io.BytesIO(b"the 201st")).size == 9


def test_ids_and_names_are_checked() -> None:
    good = "ab" * 32
    assert check_id(good) == good
    for bad in ("AB" * 32, "ab" * 31, "x" * 64, 64, None):
        with pytest.raises(BadRequest, match="64 lowercase hex characters"):
            check_id(bad)
    assert clean_name("C:\\Users\\me\\pic.png", "f") == "pic.png"
    assert clean_name("../../etc/passwd", "f") == "passwd"
    assert clean_name("a\nb\x00c", "f") == "a-b-c"
    assert clean_name("..", "fallback") == "fallback" and clean_name("", "fallback") == "fallback"
    assert len(clean_name("é" * 300, "f").encode()) <= 200
