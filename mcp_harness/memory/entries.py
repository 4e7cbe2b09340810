"""What memory reads and listings return: entries, file contents, listings, pages, the top-level summary."""

from __future__ import annotations

import contextlib
import functools
import mimetypes
import os
import stat
from dataclasses import dataclass

from mcp_harness.memory.paths import TMP_PREFIX

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_EXTRA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".ts": "text/typescript",
    ".tsx": "text/typescript",
    ".yaml": "application/x-yaml",
    ".yml": "application/x-yaml",
    ".toml": "application/toml",
    ".jsonl": "application/jsonl",
    ".py": "text/x-python",
    ".webp": "image/webp",
}


def mime_for(path: str) -> str | None:
    """The MIME type a file name implies, or None."""
    ext = os.path.splitext(path)[1].lower()
    if ext in mimetypes.encodings_map or ext in mimetypes.suffix_map:  # `.tar.gz`: the type is in the suffix before
        return _EXTRA_TYPES.get(ext) or mimetypes.guess_type(path, strict=False)[0]
    return _mime_of_extension(ext)


@functools.lru_cache(maxsize=512)
def _mime_of_extension(ext: str) -> str | None:
    # Cached: a page of 100 resources asked `mimetypes` 100 times, a third of what listing the page cost.
    return _EXTRA_TYPES.get(ext) or mimetypes.guess_type(f"name{ext}", strict=False)[0]


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryEntry:
    """One file or directory in a listing."""

    path: str
    """Relative to the memory root, `/`-joined; escaped when not addressable (memory/paths.py)."""
    type: str
    """`file` or `dir`."""
    size: int
    """Bytes (0 for directories)."""
    updated_at: int
    """Modification time, epoch milliseconds."""
    mime_type: str | None = None
    entry_count: int | None = None
    """For directories: how many names it holds (at least this many when `entry_count_capped`)."""
    entry_count_capped: bool = False
    addressable: bool = True
    """False when no address can name it (a name only sandboxed code could create); `path` is then escaped."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "type": self.type, "size": self.size, "updatedAt": self.updated_at}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.entry_count is not None:
            out["entryCount"] = self.entry_count
        if self.entry_count_capped:
            out["entryCountAtLeast"] = True
        if not self.addressable:
            out["addressable"] = False
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryFile:
    """A file's content: `text` when it is UTF-8 without NUL, else None (binary); `data` is always the bytes."""

    entry: MemoryEntry
    data: bytes
    text: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryListing:
    """One directory level."""

    path: str
    entries: list[MemoryEntry]
    total_bytes: int

    @property
    def unaddressable(self) -> int:
        return sum(1 for e in self.entries if not e.addressable)


@dataclass(frozen=True, kw_only=True, slots=True)
class DirPage:
    """One page of one directory level, in path order, with the totals of the whole level."""

    path: str
    entries: list[MemoryEntry]
    start: int
    """How many entries of the level sort before this page."""
    total_entries: int
    file_count: int
    dir_count: int
    unaddressable: int
    """Names at this level (not only on this page) that no address can carry."""
    next_after: str | None
    """The path of this page's last entry when more follow: the cursor of the next page."""
    remaining: int
    """Entries after this page."""

    @property
    def complete(self) -> bool:
        """Whether this page is the whole level (then its byte total is the level's)."""
        return self.start == 0 and self.next_after is None

    @property
    def page_bytes(self) -> int:
        return sum(e.size for e in self.entries if e.type == "file")


@dataclass(frozen=True, kw_only=True, slots=True)
class TopLevelSummary:
    """Root files and directories with recursive counts, for `~/self`.

    The recursive count is bounded (memory/listing.py): past the bound, `complete` is False and the counts are lower
    bounds, shown with "≥".
    """

    total_files: int
    top_level: list[str]
    unaddressable: int = 0
    """Files counted (anywhere in the tree) that no address can name."""
    complete: bool = True
    more_top_level: int = 0
    """Root entries beyond those in `top_level`."""


def make_entry(
    path: str,
    st: os.stat_result,
    *,
    dir_fd: int | None = None,
    name: str = "",
    addressable: bool = True,
    count_bound: int | None = None,
) -> MemoryEntry:
    """The entry of `st`; for a directory opened from `dir_fd` by `name`, with how many names it holds, counted up
    to `count_bound` (a page of 100 directories must not read 100 huge directories in full)."""
    if stat.S_ISDIR(st.st_mode):
        count, capped = 0, False
        if dir_fd is not None:
            with contextlib.suppress(OSError):
                sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                try:
                    count, capped = _count_names(sub, count_bound)
                finally:
                    os.close(sub)
        return MemoryEntry(
            path=path,
            type="dir",
            size=0,
            updated_at=_ms(st),
            entry_count=count,
            entry_count_capped=capped,
            addressable=addressable,
        )
    return MemoryEntry(
        path=path,
        type="file",
        size=st.st_size,
        updated_at=_ms(st),
        mime_type=mime_for(path),
        addressable=addressable,
    )


def _count_names(fd: int, bound: int | None) -> tuple[int, bool]:
    count = 0
    with os.scandir(fd) as it:  # read lazily, so stopping at the bound stops reading the directory
        for e in it:
            if e.name.startswith(TMP_PREFIX):
                continue
            if bound is not None and count >= bound:
                return count, True
            count += 1
    return count, False


def _ms(st: os.stat_result) -> int:
    return round(st.st_mtime_ns / 1_000_000)
