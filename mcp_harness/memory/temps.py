"""Temp files of atomic memory writes: created locked, and swept when a killed writer left them behind.

A write goes to `.mcp-harness-tmp-<random>` and is renamed over its target. A process killed in between leaves the
temp file forever, so each `MemoryStore` sweeps its tree once, on first use. Several server processes may share
one data directory, so the sweep must never take a temp file a live writer is still filling: the writer holds an
`flock` on it from creation to rename (the kernel drops the lock when the writer dies), and the sweep only takes a
file that is both unlocked and over a minute old — the age covers the instant between `open` and `flock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import stat
import time
from pathlib import Path

from mcp_harness.memory.paths import TMP_PREFIX

logger = logging.getLogger(__name__)

STALE_AFTER_SECONDS = 60.0
"""A temp file untouched this long, and unlocked, belongs to no live writer."""


def create_locked(dir_fd: int) -> tuple[str, int]:
    """A new temp file in `dir_fd`, opened for writing and `flock`ed; returns (name, descriptor)."""
    name = f"{TMP_PREFIX}{secrets.token_hex(8)}"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    return name, fd


def sweep_stale(root: Path, *, older_than: float = STALE_AFTER_SECONDS) -> int:
    """Remove the temp files under `root` that no live writer holds; returns how many. Blocking, never raises."""
    if not root.is_dir():
        return 0
    cutoff = time.time() - older_than
    removed = 0
    try:
        for _dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
            dirnames[:] = [d for d in dirnames if not d.startswith(TMP_PREFIX)]
            for name in filenames:
                if name.startswith(TMP_PREFIX) and _remove_if_stale(name, dir_fd, cutoff):
                    removed += 1
    except OSError:
        logger.warning("Sweeping stale temp files under %s stopped early", root, exc_info=True)
    if removed:
        logger.info("Removed %d stale temp file%s under %s", removed, "s" if removed != 1 else "", root)
    return removed


def _remove_if_stale(name: str, dir_fd: int, cutoff: float) -> bool:
    try:
        # O_NONBLOCK: a FIFO planted under this name must not hang the sweep; O_NOFOLLOW: a link is left alone.
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mtime > cutoff:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer (another process, or a stopped one) still holds it
        # The name must still be this inode: its writer may have renamed it away since we opened it.
        if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_ino != st.st_ino:
            return False
        os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
