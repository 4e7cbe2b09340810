"""`read`/`write` of `~/memory/…` through the MCP client: path rules, shapes, refusals (HARNESS §3)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.errors import HarnessError
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call, refused, text_of

pytestmark = pytest.mark.anyio


async def test_write_then_read_returns_content_and_metadata(client: Client) -> None:
    wrote = await call(client, "write", {"address": "~/memory/notes/today.md", "content": "# Hi\nthere"})
    assert wrote["summary"] == "Wrote notes/today.md (10 bytes)."
    assert wrote["path"] == "notes/today.md" and wrote["size"] == 10 and wrote["mimeType"] == "text/markdown"
    result = await client.call_tool("read", {"address": "~/memory/notes/today.md"})
    assert text_of(result) == "# Hi\nthere"
    data = result.structured_content
    assert data is not None
    assert data["content"] == "# Hi\nthere" and data["encoding"] == "utf8"
    assert data["summary"] == "Read notes/today.md (10 bytes)."


async def test_equivalent_spellings_normalize_to_one_path(client: Client) -> None:
    await call(client, "write", {"address": "~/memory//notes/./deep\\file.txt", "content": "x"})
    data = await call(client, "read", {"address": "~/memory/notes/deep/file.txt"})
    assert data["path"] == "notes/deep/file.txt"
    via_uri = await call(client, "read", {"address": "harness://memory/notes/deep/file.txt"})
    assert via_uri["content"] == "x"


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("a\x00b", "invalid character"),
        ("../outside.txt", '".."'),
        ("notes/../../etc/passwd", '".."'),
        ("/".join(["d"] * 17), "too deep"),
        ("x" * 200 + "/" + "y" * 200 + "/" + "z" * 112, "too long"),
        ("n" * 256, "each name holds at most 255 bytes"),
        ("", "Memory path is required"),
        ("notes/a\nb.md", "control character (U+000A)"),
        ("tab\there", "control character (U+0009)"),
        ("line\u2028sep", "control character (U+2028)"),
        (".mcp-harness-tmp-0123", "reserved"),
    ],
)
async def test_adversarial_paths_are_refused_with_a_reason(client: Client, path: str, fragment: str) -> None:
    error = await refused(client, "write", {"address": f"~/memory/{path}", "content": "x"})
    assert error["status"] == 400 and fragment in error["message"]


async def test_depth_sixteen_and_512_bytes_are_accepted(client: Client) -> None:
    await call(client, "write", {"address": "~/memory/" + "/".join(["d"] * 16), "content": "deep"})
    await call(client, "write", {"address": "~/memory/" + "y" * 255 + "/" + "z" * 254 + "/w", "content": "long"})


async def test_symlinks_are_never_followed(client: Client, harness: Harness, tmp_path: os.PathLike[str]) -> None:
    await call(client, "write", {"address": "~/memory/keep.txt", "content": "k"})
    root = harness.agent().memory_dir
    secret = os.path.join(tmp_path, "secret.txt")
    with open(secret, "w", encoding="utf-8") as fh:
        fh.write("top secret")
    os.symlink(secret, root / "link.txt")
    os.symlink(os.path.dirname(secret), root / "linkdir")
    error = await refused(client, "read", {"address": "~/memory/link.txt"})
    assert error["status"] == 404
    error = await refused(client, "read", {"address": "~/memory/linkdir/secret.txt"})
    assert error["status"] == 404
    error = await refused(client, "write", {"address": "~/memory/link.txt", "content": "overwrite"})
    assert error["status"] == 400 and "symlink" in error["message"]
    error = await refused(client, "write", {"address": "~/memory/linkdir/new.txt", "content": "escape"})
    assert error["status"] == 400
    listing = await call(client, "read", {"address": "~/memory/"})
    assert [e["path"] for e in listing["entries"]] == ["keep.txt"]
    with open(secret, encoding="utf-8") as fh:
        assert fh.read() == "top secret"
    assert not os.path.exists(os.path.join(os.path.dirname(secret), "new.txt"))
    deleted = await call(client, "write", {"address": "~/memory/linkdir", "options": {"delete": True}})
    assert deleted["deleted"] is True and os.path.exists(secret)


async def test_listing_shapes_and_summaries(client: Client) -> None:
    empty = await call(client, "read", {"address": "~/memory/"})
    assert empty == {"summary": "Memory root is empty.", "path": "", "entries": [], "totalEntries": 0, "totalBytes": 0}
    await call(client, "write", {"address": "~/memory/a.txt", "content": "12345"})
    await call(client, "write", {"address": "~/memory/docs/b.md", "content": "b"})
    await call(client, "write", {"address": "~/memory/docs/c.md", "content": "cc"})
    root = await call(client, "read", {"address": "~/memory"})
    assert root["summary"] == (
        "Memory root holds 1 file (5 bytes) and 1 directory (read a directory address to see inside)."
    )
    assert [(e["path"], e["type"], e["size"]) for e in root["entries"]] == [("a.txt", "file", 5), ("docs", "dir", 0)]
    assert root["entries"][1]["entryCount"] == 2
    docs = await call(client, "read", {"address": "~/memory/docs/"})
    assert docs["summary"] == "docs/ holds 2 files (3 bytes)." and docs["totalBytes"] == 3
    bare = await call(client, "read", {"address": "~/memory/docs"})
    assert bare["entries"] == docs["entries"]


async def test_missing_file_reports_the_file_error(client: Client) -> None:
    error = await refused(client, "read", {"address": "~/memory/nope.txt"})
    assert error == {"code": "not-found", "status": 404, "message": "Memory file not found: nope.txt"}
    await call(client, "write", {"address": "~/memory/f.txt", "content": "x"})
    error = await refused(client, "read", {"address": "~/memory/f.txt/"})
    assert error["status"] == 400 and "is a file" in error["message"]


async def test_binary_files_are_metadata_only(client: Client, harness: Harness) -> None:
    root = harness.agent().memory_dir
    (root / "img.png").write_bytes(b"\x00\x00not a PNG, binary")  # a real PNG is shown (test_attachment.py)
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    data = await call(client, "read", {"address": "~/memory/img.png"})
    assert data["encoding"] == "binary" and "content" not in data and data["mimeType"] == "image/png"
    assert data["summary"].startswith("img.png is a binary file (19 bytes, image/png); content not shown.")
    latin = await call(client, "read", {"address": "~/memory/latin1.txt"})
    assert latin["encoding"] == "binary" and "content" not in latin


async def test_write_replaces_the_whole_file(client: Client) -> None:
    await call(client, "write", {"address": "~/memory/f.txt", "content": "a long first version"})
    await call(client, "write", {"address": "~/memory/f.txt", "content": "short"})
    assert (await call(client, "read", {"address": "~/memory/f.txt"}))["content"] == "short"


async def test_delete_removes_files_and_trees_and_reports_nothing(client: Client) -> None:
    await call(client, "write", {"address": "~/memory/t/one.txt", "content": "1"})
    await call(client, "write", {"address": "~/memory/t/sub/two.txt", "content": "2"})
    gone = await call(client, "write", {"address": "~/memory/t", "options": {"delete": True}})
    assert gone == {"summary": "Deleted t.", "path": "t", "deleted": True}
    again = await call(client, "write", {"address": "~/memory/t", "options": {"delete": True}})
    assert again == {"summary": "Nothing existed at t.", "path": "t", "deleted": False}
    error = await refused(client, "write", {"address": "~/memory/", "options": {"delete": True}})
    assert "Memory path is required" in error["message"]


async def test_write_refusals_name_the_supported_set(client: Client) -> None:
    error = await refused(client, "write", {"address": "~/memory/x", "content": "c", "options": {"append": True}})
    assert error["message"] == (
        'write ~/memory does not understand option "append". Supported options: delete, fromUrl, fromAttachment.'
    )
    # fromUrl is served (tests/web/test_web.py), fromAttachment too (tests/spaces/test_attachment.py).
    error = await refused(client, "write", {"address": "~/memory/x", "options": {"fromAttachment": "ab" * 32}})
    assert error["message"].startswith(f"No attachment {'ab' * 32} in this conversation.")
    error = await refused(client, "write", {"address": "~/memory/x"})
    assert error["message"].startswith("write to ~/memory requires content")
    error = await refused(client, "write", {"address": "~/memory/x", "content": "c", "dryRun": True})
    assert "dryRun is only for hm://" in error["message"]
    error = await refused(client, "write", {"address": "~/memory/x", "content": 5})
    assert "$.content" in error["message"] and "Accepted fields" in error["message"]
    await call(client, "write", {"address": "~/memory/d2/f", "content": "c"})
    error = await refused(client, "write", {"address": "~/memory/d2", "content": "c"})
    assert "is a directory" in error["message"]


async def test_a_fifo_planted_in_memory_cannot_hang_a_read(client: Client, harness: Harness) -> None:
    """A sandboxed program can create any file type in memory; a FIFO must not block the verb waiting for a writer."""
    await call(client, "write", {"address": "~/memory/keep.txt", "content": "k"})
    os.mkfifo(harness.agent().memory_dir / "pipe")
    with anyio.fail_after(10):
        error = await refused(client, "read", {"address": "~/memory/pipe"})
    assert error["status"] == 404 and "not a regular file" in error["message"]
    listing = await call(client, "read", {"address": "~/memory/"})
    assert [e["path"] for e in listing["entries"]] == ["keep.txt"]


def test_swapping_a_directory_for_a_symlink_mid_walk_never_escapes(harness: Harness, tmp_path: Path) -> None:
    """A separate process (as a sandboxed program would be) flips memory/d between a real directory and a symlink to
    an outside directory, while we read and write through it. Every operation acts on the inode it checked, so none
    reaches outside."""
    memory = harness.memory(harness.agent())
    root = harness.agent().memory_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside secret")
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("inside")
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(root), str(outside)])
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 2.0
        i = 0
        while time.monotonic() < deadline:
            i += 1
            with contextlib.suppress(HarnessError):
                seen.add(memory.read_file("d/f.txt").text or "")
            with contextlib.suppress(HarnessError, OSError):
                memory.write_file(f"d/new-{i % 5}.txt", b"payload")
    finally:
        swapper.kill()
        swapper.wait()
    assert "inside" in seen, "the race never let a read through; the test proved nothing"
    assert "outside secret" not in seen
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "outside secret"


_SWAPPER = """
import os, sys
root, outside = sys.argv[1], sys.argv[2]
inside, stash = os.path.join(root, "d"), os.path.join(root, "d-real")
while True:
    try:
        os.rename(inside, stash)
        os.symlink(outside, inside)
        os.unlink(inside)
        os.rename(stash, inside)
    except OSError:
        pass
"""


# -- temp files left by interrupted writes ------------------------------------------------------------------------

_HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""

_WRITE_THEN_HANG = """
import os, sys, time
from pathlib import Path
from mcp_harness.memory.store import MemoryStore

def hang(*args, **kwargs):
    print("writing", flush=True)
    time.sleep(120)

os.replace = hang  # the write stops between filling its temp file and renaming it: kill it there
MemoryStore(Path(sys.argv[1])).write_file("notes/big.bin", b"x" * 1_000_000)
"""


def _temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".mcp-harness-tmp-*"))


def _age(path: Path, seconds: float = 120) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


async def _list_through_a_new_server(data_dir: Path) -> list[str]:
    """Start a server on the data directory, as a restart would, and list memory through it."""
    harness = Harness(load_settings(data_dir=data_dir))
    try:
        async with Client(build_server(harness), mode="2026-07-28") as c:
            listing = await call(c, "read", {"address": "~/memory/"})
            return [e["path"] for e in listing["entries"]]
    finally:
        harness.close()


async def test_a_start_sweeps_stale_temp_files_but_not_live_ones(harness: Harness, data_dir: Path) -> None:
    root = harness.agent().memory_dir
    (root / "sub").mkdir(parents=True)
    (root / "keep.txt").write_text("k")
    for rel in (".mcp-harness-tmp-stale1", "sub/.mcp-harness-tmp-stale2"):
        (root / rel).write_bytes(b"half a write")
        _age(root / rel)
    (root / ".mcp-harness-tmp-fresh").write_bytes(b"being written")  # another process's write, just begun
    held = root / "sub" / ".mcp-harness-tmp-held"
    held.write_bytes(b"a slow writer")
    _age(held)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert await _list_through_a_new_server(data_dir) == ["keep.txt", "sub"]
        assert _temps(root) == [".mcp-harness-tmp-fresh", "sub/.mcp-harness-tmp-held"]
    finally:
        holder.kill()
        holder.wait()
    # Once its writer is gone, the old one goes at the next start; the fresh one waits out its minute.
    await _list_through_a_new_server(data_dir)
    assert _temps(root) == [".mcp-harness-tmp-fresh"]


async def test_a_write_killed_mid_way_is_cleaned_up_at_the_next_start(harness: Harness, data_dir: Path) -> None:
    root = harness.agent().memory_dir
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITE_THEN_HANG, str(root)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
    finally:
        writer.kill()
        writer.wait()
    left = _temps(root)
    assert len(left) == 1 and left[0].startswith("notes/.mcp-harness-tmp-")
    assert (root / left[0]).stat().st_size == 1_000_000
    assert await _list_through_a_new_server(data_dir) == ["notes"]  # never listed, even before it is swept
    assert _temps(root) == left  # under a minute old: it could be a live writer's
    _age(root / left[0])
    await _list_through_a_new_server(data_dir)
    assert _temps(root) == []
    harness.memory(harness.agent()).write_file("notes/big.bin", b"whole")  # writing after a sweep still works
    assert (root / "notes" / "big.bin").read_bytes() == b"whole" and _temps(root) == []
