"""Bounded views of the memory tree: a page of one directory, and the top-level summary (the tree's files a page
at a time, for resources/list, are in memory/walk.py).

A tree may hold 100k files, and these views are read often (a listing by the agent, `~/self` by anyone), so neither
stats more than it returns. Names and types come from the directory entries themselves (`d_type`, via `os.scandir`),
which costs no stat per name; only the entries a page returns are statted. Reading all the names of one directory is
allowed (they must be sorted to page in path order); walking the whole tree is not: the summary's recursive count
stops at a bound and says "≥".
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp_harness.memory.entries import DirPage, MemoryEntry, TopLevelSummary, make_entry
from mcp_harness.memory.paths import TMP_PREFIX, child_addressable, display_name, display_names, unaddressable_children

if TYPE_CHECKING:
    from mcp_harness.memory.store import MemoryStore

ENTRY_COUNT_BOUND = 1000
"""How far a listing counts the names in each directory it lists; beyond, it says "at least"."""
LISTING_PAGE_BYTES = 96 * 1024
"""What one listing page's entry paths may add up to, so a page of long escaped names stays small on the wire."""
SUMMARY_SHOWN = 50
"""Root entries `~/self` names; the rest are counted."""
SUMMARY_WALK = 5000
"""Entries the summary's recursive count visits at most; past it the counts are lower bounds ("≥")."""
SUMMARY_DEPTH = 32
"""Levels the summary's count descends (deeper than any address reaches); deeper trees count as incomplete."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def scan(dir_fd: int) -> list[tuple[str, bool]]:
    """`(name, is_dir)` of the regular files and directories in `dir_fd`, temp files left out, unsorted."""
    out: list[tuple[str, bool]] = []
    with os.scandir(dir_fd) as it:
        for e in it:
            if e.name.startswith(TMP_PREFIX):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    out.append((e.name, True))
                elif e.is_file(follow_symlinks=False):
                    out.append((e.name, False))
            except OSError:  # gone since readdir
                continue
    return out


def page_dir(store: MemoryStore, path: str, after: str | None, limit: int) -> DirPage:
    """Up to `limit` entries of the level `path` whose paths sort after `after`, sorted by path."""
    parts = path.split("/") if path else []
    fd = store.open_listing(path)
    try:
        names = scan(fd)
        # Sorted as plain strings (shown names; the real one is looked up only for the few that are escaped): with
        # 100k names, sorting tuples cost more than reading the directory.
        dirs = sum(1 for _, is_dir in names if is_dir)
        real = [name for name, _ in names]
        escaped = display_names(real)
        shown_of = {n: s for s, n in escaped.items()}
        keys = [shown_of.get(n, n) for n in real] if escaped else real
        keys.sort()
        start = bisect_right(keys, after.rpartition("/")[2]) if after is not None else 0
        entries: list[MemoryEntry] = []
        used = 0
        i = start
        while i < len(keys) and len(entries) < limit and used < LISTING_PAGE_BYTES:
            shown = keys[i]
            name = escaped.get(shown, shown)
            i += 1
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):  # re-checked: it may have changed since readdir
                rel = f"{path}/{shown}" if path else shown
                ok = child_addressable(name, parts)
                entry = make_entry(rel, st, dir_fd=fd, name=name, addressable=ok, count_bound=ENTRY_COUNT_BOUND)
                entries.append(entry)
                used += len(rel.encode("utf-8")) + 64
    finally:
        os.close(fd)
    last = None
    if i < len(keys):  # the cursor is the path of the last entry looked at, listed or not (it may have vanished)
        last = f"{path}/{keys[i - 1]}" if path else keys[i - 1]
    return DirPage(
        path=path,
        entries=entries,
        start=start,
        total_entries=len(keys),
        file_count=len(keys) - dirs,
        dir_count=dirs,
        unaddressable=len(unaddressable_children(real, parts)),
        next_after=last,
        remaining=len(keys) - i,
    )


@dataclass
class _Tally:
    files: int = 0
    size: int = 0
    unaddressable: int = 0
    complete: bool = True


def summarize(store: MemoryStore) -> TopLevelSummary:
    """Root files by name, and the first root directories with recursive counts, in one walk of bounded size."""
    fd = store.open_listing("")
    try:
        names = scan(fd)
        dirs = sorted((display_name(n), n) for n, d in names if d)
        real = [n for n, d in names if not d]
        escaped = display_names(real)
        shown_of = {n: s for s, n in escaped.items()}
        files = sorted(shown_of.get(n, n) for n in real)  # strings: 100k of them sort quickly, tuples not
        shown_dirs = dirs[:SUMMARY_SHOWN]
        budget = [SUMMARY_WALK]
        tallies: list[_Tally | None] = []
        for _, name in shown_dirs:
            if budget[0] <= 0:
                tallies.append(None)
                continue
            tally = _Tally()
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                tallies.append(tally)
                continue
            try:
                _count(sub, [name], child_addressable(name, []), tally, budget)
            finally:
                os.close(sub)
            tallies.append(tally)
    finally:
        os.close(fd)
    lines = [_dir_line(shown, tally) for (shown, _), tally in zip(shown_dirs, tallies, strict=True)]
    room = max(0, SUMMARY_SHOWN - len(shown_dirs))
    bad = {shown_of.get(n, n) for n in unaddressable_children(real, [])}
    lines += [shown + (" (not addressable)" if shown in bad else "") for shown in files[:room]]
    counted = [t for t in tallies if t is not None]
    return TopLevelSummary(
        total_files=len(files) + sum(t.files for t in counted),
        top_level=lines,
        unaddressable=len(bad) + sum(t.unaddressable for t in counted),
        complete=len(dirs) == len(shown_dirs) and all(t is not None and t.complete for t in tallies),
        more_top_level=len(dirs) + len(files) - len(lines),
    )


def _count(fd: int, parts: list[str], ok: bool, tally: _Tally, budget: list[int]) -> None:
    """Add the files under `fd` (the directory `parts`, addressable when `ok`) to `tally`, visiting at most
    `budget[0]` entries (the budget is shared)."""
    with os.scandir(fd) as it:
        for e in it:
            if e.name.startswith(TMP_PREFIX):
                continue
            if budget[0] <= 0:
                tally.complete = False
                return
            budget[0] -= 1
            try:
                if e.is_file(follow_symlinks=False):
                    tally.files += 1
                    tally.size += e.stat(follow_symlinks=False).st_size
                    tally.unaddressable += not (ok and child_addressable(e.name, parts))
                elif e.is_dir(follow_symlinks=False):
                    if len(parts) >= SUMMARY_DEPTH:
                        tally.complete = False
                        continue
                    sub = os.open(e.name, _DIR_FLAGS, dir_fd=fd)
                    try:
                        _count(sub, [*parts, e.name], ok and child_addressable(e.name, parts), tally, budget)
                    finally:
                        os.close(sub)
            except OSError:  # gone, or swapped for something else, since readdir
                continue


def _dir_line(shown: str, tally: _Tally | None) -> str:
    if tally is None:
        return f"{shown}/ (not counted)"
    at_least = "" if tally.complete else "≥ "
    n, bad = tally.files, tally.unaddressable
    note = f"; {at_least}{bad} not addressable" if bad else ""
    return f"{shown}/ ({at_least}{n} file{'s' if n != 1 else ''}, {at_least}{tally.size} bytes{note})"
