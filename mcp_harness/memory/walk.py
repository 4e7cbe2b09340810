"""The memory tree's files in path order, a page at a time: what resources/list serves.

A walk keeps, for each directory on its current path, that directory's sorted names and how far it got, and pauses
between pages holding no descriptor. Paused walks wait in a `WalkCache` under the cursor that resumes them, so a
client paging through n files costs one walk of the tree in all (O(n)), not one per page (O(n²)). Any cursor also
resumes without its walk — evicted, expired, served by another process or before a restart — by descending along
its path: one sorted read of each directory on that path.

Per file a page costs one `stat` (for the size a host shows) and no more: names and types come from the directory
read, and the MIME type from a table by extension. At 100k files every microsecond per file is a tenth of a second.
"""

from __future__ import annotations

import mimetypes
import os
import stat
import sys
import threading
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from mcp_harness.memory.entries import mime_for
from mcp_harness.memory.listing import scan
from mcp_harness.memory.paths import unaddressable_children

if TYPE_CHECKING:
    from mcp_harness.memory.store import MemoryStore

KEPT_WALKS = 8
WALK_TTL_SECONDS = 120.0
"""A paused walk older than this is dropped: a cursor kept that long resumes against the tree as it is now."""
PATH_OVERHEAD = 64
"""What a file costs a page beyond its path's bytes, for a page's byte budget (`take(max_bytes=…)`)."""


class WalkedFile(NamedTuple):
    """One file of a page. A named tuple, not a dataclass: a page of 100k files builds 100k of them, and a tuple is
    the cheapest immutable record Python has."""

    path: str
    """Relative to the memory root, `/`-joined (only addressable files are walked, so never escaped)."""
    size: int
    mime_type: str | None


@dataclass
class _Frame:
    parts: list[str]
    keys: list[str]
    """Sorted names, a directory's with "/" appended: walking them in order, depth first, yields full paths in plain
    string order (every path under `d/` sorts between `d/` and the next key, since no name holds a "/")."""
    index: int = 0


@dataclass
class FileWalk:
    """The addressable regular files of a tree in path order, a page at a time, from just after a given path.

    Names no address can carry are skipped with their whole subtree (every path below them is unaddressable too):
    every resource offered must be readable.
    """

    store: MemoryStore
    stack: list[_Frame] = field(default_factory=lambda: [])
    pending: WalkedFile | None = None
    """The first file of the next page, taken to learn whether there is one."""

    @classmethod
    def after(cls, store: MemoryStore, path: str | None) -> FileWalk:
        """A walk of the files after `path` (all of them for None), found by descending along `path`."""
        walk = cls(store)
        parts: list[str] = []
        keys = walk._read(parts)
        segments = path.split("/") if path else []
        for i, segment in enumerate(segments):
            if keys is None:
                return walk
            if i == len(segments) - 1:  # the file itself: resume after its name
                walk.stack.append(_Frame(parts, keys, bisect_right(keys, segment)))
                return walk
            at = bisect_left(keys, segment + "/")
            if at == len(keys) or keys[at] != segment + "/":  # the directory is gone: resume at its place
                walk.stack.append(_Frame(parts, keys, at))
                return walk
            walk.stack.append(_Frame(parts, keys, at + 1))
            parts = [*parts, segment]
            keys = walk._read(parts)
        if keys is not None:
            walk.stack.append(_Frame(parts, keys))
        return walk

    @property
    def more(self) -> bool:
        return self.pending is not None

    def take(self, limit: int, max_bytes: int | None = None) -> list[WalkedFile]:
        """The next `limit` files (at least one, if any are left), fewer when their paths, plus `PATH_OVERHEAD`
        each, would pass `max_bytes`."""
        limit = max(1, limit)
        out: list[WalkedFile] = []
        budget = max_bytes if max_bytes is not None else sys.maxsize
        if self.pending is not None:
            out.append(self.pending)
            budget -= len(self.pending.path) + PATH_OVERHEAD
            self.pending = None
        # Until one file past the page (past its count or its bytes), to learn whether there is a next page: that
        # file waits in `pending` for it.
        while self.stack and len(out) <= limit and (budget >= 0 or len(out) < 2):
            budget = self._step(out, limit + 1, budget)
        if len(out) > limit or (budget < 0 and len(out) > 1):
            self.pending = out.pop()
        return out

    def _step(self, out: list[WalkedFile], want: int, budget: int) -> int:
        """One step of the walk: leave a finished directory, enter the next one, or append the run of files that
        comes next in this one to `out` (up to `want` files, or one past the byte `budget`). Returns the budget
        left."""
        frame = self.stack[-1]
        keys, i = frame.keys, frame.index
        if i >= len(keys):
            self.stack.pop()
            return budget
        if keys[i][-1] == "/":
            frame.index = i + 1
            sub = [*frame.parts, keys[i][:-1]]
            sub_keys = self._read(sub)
            if sub_keys:
                self.stack.append(_Frame(sub, sub_keys))
            return budget
        fd = self.store.open_dir(frame.parts)
        if fd is None:  # the directory went away since it was read: so did its files
            self.stack.pop()
            return budget
        prefix = "/".join(frame.parts) + "/" if frame.parts else ""
        try:
            while i < len(keys) and len(out) < want and (budget >= 0 or len(out) < 2):
                name = keys[i]
                if name[-1] == "/":
                    break
                i += 1
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:  # gone since the directory was read
                    continue
                if stat.S_ISREG(st.st_mode):  # re-checked: it may have been replaced since the read
                    path = prefix + name
                    out.append(WalkedFile(path, st.st_size, _mime(name)))
                    budget -= len(path) + PATH_OVERHEAD
        finally:
            os.close(fd)
        frame.index = i
        return budget

    def _read(self, parts: list[str]) -> list[str] | None:
        fd = self.store.open_dir(parts)
        if fd is None:
            return None
        try:
            names = scan(fd)
        finally:
            os.close(fd)
        bad = unaddressable_children([n for n, _ in names], parts)
        keys = [f"{n}/" if d else n for n, d in names if n not in bad]
        keys.sort()
        return keys


_MIME_BY_EXTENSION: dict[str, str | None] = {}
_MIME_KEPT = 1024


def _mime(name: str) -> str | None:
    """`mime_for(name)`, from a table by extension when the extension alone decides it.

    `mime_for` splits the extension off first (os.path.splitext) and looks at the name before it only for an
    encoding suffix (`.gz` in `.tar.gz`); for a name not starting with "." splitext's extension is just what follows
    the last ".", so one `rfind` finds the table's key.
    """
    dot = name.rfind(".")
    if dot <= 0 or name[0] == ".":
        return mime_for(name)
    ext = name[dot:]
    try:
        return _MIME_BY_EXTENSION[ext]
    except KeyError:
        pass
    mime = mime_for(name)
    lowered = ext.lower()
    if lowered not in mimetypes.encodings_map and lowered not in mimetypes.suffix_map:
        if len(_MIME_BY_EXTENSION) < _MIME_KEPT:  # bounded: extensions are whatever names the agent made
            _MIME_BY_EXTENSION[ext] = mime
    return mime


class WalkCache:
    """Walks paused at a page boundary, by the cursor that resumes them (at most `KEPT_WALKS`, for a while)."""

    def __init__(self) -> None:
        self._walks: OrderedDict[str, tuple[float, FileWalk]] = OrderedDict()
        self._lock = threading.Lock()

    def page(
        self, store: MemoryStore, after: str | None, limit: int, max_bytes: int | None = None
    ) -> tuple[list[WalkedFile], str | None]:
        now = time.monotonic()
        with self._lock:  # popped: a walk is resumed by one caller only
            kept = self._walks.pop(after or "", None)
        walk = kept[1] if kept is not None and now - kept[0] < WALK_TTL_SECONDS else None
        if walk is None:
            walk = FileWalk.after(store, after)
        files = walk.take(limit, max_bytes)
        if not walk.more or not files:
            return files, None
        cursor = files[-1].path
        with self._lock:
            self._walks[cursor] = (now, walk)
            while len(self._walks) > KEPT_WALKS:
                self._walks.popitem(last=False)
        return files, cursor

    def clear(self) -> None:
        with self._lock:
            self._walks.clear()
