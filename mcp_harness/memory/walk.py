"""The memory tree's files in path order, a page at a time: what resources/list serves.

A walk keeps, for each directory on its current path, that directory's sorted names and how far it got, and pauses
between pages holding no descriptor. Paused walks wait in a `WalkCache` under the cursor that resumes them, so a
client paging through n files costs one walk of the tree in all (O(n)), not one per page (O(n²)). Any cursor also
resumes without its walk — evicted, expired, served by another process or before a restart — by descending along
its path: one sorted read of each directory on that path.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcp_harness.memory.entries import MemoryEntry, make_entry
from mcp_harness.memory.listing import scan
from mcp_harness.memory.paths import unaddressable_children

if TYPE_CHECKING:
    from mcp_harness.memory.store import MemoryStore

KEPT_WALKS = 8
WALK_TTL_SECONDS = 120.0
"""A paused walk older than this is dropped: a cursor kept that long resumes against the tree as it is now."""


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
    pending: MemoryEntry | None = None
    """The first entry of the next page, taken to learn whether there is one."""

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

    def take(self, limit: int) -> list[MemoryEntry]:
        """The next `limit` files (at least one, if any are left)."""
        limit = max(1, limit)
        out: list[MemoryEntry] = [self.pending] if self.pending is not None else []
        self.pending = None
        held: list[tuple[list[str], int | None]] = []  # one open directory at a time, reopened when the walk returns
        try:
            while len(out) <= limit:
                entry = self._next(held)
                if entry is None:
                    break
                out.append(entry)
        finally:
            for _, fd in held:
                if fd is not None:
                    os.close(fd)
        if len(out) > limit:
            self.pending = out.pop()
        return out

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

    def _next(self, held: list[tuple[list[str], int | None]]) -> MemoryEntry | None:
        while self.stack:
            frame = self.stack[-1]
            if frame.index >= len(frame.keys):
                self.stack.pop()
                continue
            name = frame.keys[frame.index]
            frame.index += 1
            if name.endswith("/"):
                keys = self._read([*frame.parts, name[:-1]])
                if keys:
                    self.stack.append(_Frame([*frame.parts, name[:-1]], keys))
                continue
            if not held or held[0][0] != frame.parts:
                for _, fd in held:
                    if fd is not None:
                        os.close(fd)
                held[:] = [(frame.parts, self.store.open_dir(frame.parts))]
            fd = held[0][1]
            if fd is None:
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                return make_entry("/".join([*frame.parts, name]), st)
        return None


class WalkCache:
    """Walks paused at a page boundary, by the cursor that resumes them (at most `KEPT_WALKS`, for a while)."""

    def __init__(self) -> None:
        self._walks: OrderedDict[str, tuple[float, FileWalk]] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, store: MemoryStore, after: str | None, limit: int) -> tuple[list[MemoryEntry], str | None]:
        now = time.monotonic()
        with self._lock:  # popped: a walk is resumed by one caller only
            kept = self._walks.pop(after or "", None)
        walk = kept[1] if kept is not None and now - kept[0] < WALK_TTL_SECONDS else None
        if walk is None:
            walk = FileWalk.after(store, after)
        entries = walk.take(limit)
        if not walk.more or not entries:
            return entries, None
        cursor = entries[-1].path
        with self._lock:
            self._walks[cursor] = (now, walk)
            while len(self._walks) > KEPT_WALKS:
                self._walks.popitem(last=False)
        return entries, cursor

    def clear(self) -> None:
        with self._lock:
            self._walks.clear()
