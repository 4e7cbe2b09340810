"""What a sandboxed call changed in its workspace: an lstat snapshot before and after, compared.

The walk never follows a symlink, neither to stat it nor to descend: sandboxed code may plant links to `/etc` or to
the data directory, and the server must not read through them. A link is recorded as itself (its own inode, size
and times), so creating, retargeting or removing one shows up as a change like any file's. Directories are walked
but not reported: their times move whenever a child does, which says nothing the child's own entry does not.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcp_harness.memory.paths import TMP_PREFIX, display_path

logger = logging.getLogger(__name__)

MAX_ENTRIES = 100_000
"""Entries recorded per snapshot; a larger tree is cut (and logged) rather than held in memory whole."""

ChangeKind = Literal["added", "modified", "removed"]

Signature = tuple[int, int, int, int, int]
"""(file type bits, size, mtime_ns, inode, ctime_ns): any rewrite, replace-by-rename or chmod moves one of them."""


@dataclass(frozen=True, slots=True)
class FileChange:
    """One workspace entry that differs between the snapshots taken around a call."""

    path: str
    """Relative to the workspace, '/'-joined; escaped as memory listings show it when no address can name it."""
    change: ChangeKind
    """'added', 'modified' or 'removed'."""


def snapshot(root: Path) -> dict[str, Signature]:
    """Every non-directory entry under `root` by relative path, from `lstat` only. Blocking.

    A missing root is an empty snapshot. Unreadable subdirectories are skipped: the sandbox can make a directory
    mode 000, and that must not fail the call.
    """
    entries: dict[str, Signature] = {}
    pending: list[tuple[str, str]] = [(str(root), "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    rel = prefix + entry.name
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        pending.append((entry.path, rel + "/"))
                        continue
                    if len(entries) >= MAX_ENTRIES:
                        logger.warning(
                            "Workspace %s has over %d entries; changes past that are not reported", root, MAX_ENTRIES
                        )
                        return entries
                    entries[rel] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        except OSError:
            continue
    return entries


def diff(before: dict[str, Signature], after: dict[str, Signature]) -> list[FileChange]:
    """The changes from `before` to `after`, sorted by path.

    Paths are shown as memory listings show them (memory/paths.py): names the sandbox wrote need not be UTF-8 or
    printable, and scandir hands them over surrogate-escaped, which JSON cannot carry. Temp files of memory writes
    (a verb writing while the program ran) are not the program's changes, and listings never show them either.
    """
    changes: list[FileChange] = []
    for path in sorted(before.keys() | after.keys()):
        parts = path.split("/")
        if any(p.startswith(TMP_PREFIX) for p in parts):
            continue
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        kind: ChangeKind = "added" if old is None else "removed" if new is None else "modified"
        changes.append(FileChange(display_path(parts), kind))
    changes.sort(key=lambda c: c.path)
    return changes
