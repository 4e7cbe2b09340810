"""WAL checkpoints on a thread of their own, not on whichever commit happens to cross SQLite's threshold.

Why: SQLite's automatic checkpoint runs inside the commit that grows the WAL past 1,000 pages, on the committing
connection, and a checkpoint syncs the database file. In a wide fan-out that commit is one of the engine's store
lane groups (`runs/lane.py`), so every run queued behind it waited the 10–50 ms of a sync here: about a fifth of the
lane's time per tree. A passive checkpoint from a second connection does the same work beside the writer (SQLite
lets writers append to the WAL while it copies), and the lane only pays a 4-byte read of the WAL's frame count
every few commits.

What stays as it was: the WAL is still checkpointed at about the same size, a clean close still leaves no WAL behind
(the last connection to close checkpoints it), and a crash at any point is SQLite's ordinary WAL recovery. SQLite's
own automatic checkpoint stays on at a higher threshold (`BACKSTOP_PAGES`) in case this thread falls behind or writes
come through paths that never tell it (autocommit statements outside `transaction()`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

CHECKPOINT_FRAMES = 1_000
"""Checkpoint once the WAL holds this many frames: SQLite's own default (`wal_autocheckpoint`)."""
CHECK_EVERY = 8
"""Commits between looks at the WAL's frame count (a 4-byte read of the wal-index, a few microseconds)."""
BACKSTOP_PAGES = 4_000
"""SQLite's own automatic checkpoint, on the committing connection, beyond this many WAL pages: when commits come
faster than this thread can catch up with them, the WAL grows to this, and the commit's own checkpoint then finds
most of it copied already and starts it over."""
PASSES = 4
"""Checkpoints in a row, at most, chasing commits that land while one runs."""
_MX_FRAME = 16
"""Where the wal-index header (the `-shm` file, native byte order) keeps `mxFrame`, the WAL's valid frame count
(sqlite.org/walformat.html, "The WAL-Index Header")."""


class Checkpointer:
    """Checkpoints `path`'s WAL (PASSIVE) on a daemon thread with its own connection, started on first need."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._shm = f"{path}-shm"
        self._shm_fd: int | None = None
        self._commits = 0
        self._asked_at = 0
        """The frame count when a checkpoint was last asked for. After a checkpoint that caught up, the next commit
        starts the WAL over (the count drops); while commits outrun it, the count only grows, and the next request
        waits for another `CHECKPOINT_FRAMES`, so a busy writer meets SQLite's own cadence, not a checkpoint each
        `CHECK_EVERY` commits."""
        self._wanted = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """After a commit (under the database's lock): ask for a checkpoint when the WAL has grown enough."""
        self._commits += 1
        if self._commits % CHECK_EVERY or self._stopping:
            return
        frames = self._frames()
        if frames is None:
            return
        if frames < self._asked_at:
            self._asked_at = 0  # the WAL started over
        if frames < CHECKPOINT_FRAMES or (self._asked_at and frames - self._asked_at < CHECKPOINT_FRAMES):
            return
        self._asked_at = frames
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
            self._thread.start()
        self._wanted.set()

    def _frames(self) -> int | None:
        try:
            if self._shm_fd is None:
                self._shm_fd = os.open(self._shm, os.O_RDONLY)
            header = os.pread(self._shm_fd, 4, _MX_FRAME)
        except OSError:
            return None
        return int.from_bytes(header, sys.byteorder) if len(header) == 4 else None

    def close(self) -> None:
        """Stop the thread (after a checkpoint under way). The caller's connection, closing last, checkpoints."""
        self._stopping = True
        thread = self._thread
        if thread is not None:
            self._wanted.set()
            thread.join()
            self._thread = None
        if self._shm_fd is not None:
            os.close(self._shm_fd)
            self._shm_fd = None

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=10.0, check_same_thread=False)
        except sqlite3.Error:
            logger.exception("The WAL checkpointer could not open %s; SQLite's own checkpoint remains", self._path)
            return
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._stopping:
                    return
                try:
                    # Again while commits landed meanwhile: each pass copies less, and only one that catches up
                    # lets the next commit start the WAL over.
                    for _ in range(PASSES):
                        _, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                        now = self._frames()
                        if copied < frames or now is None or now <= frames or self._stopping:
                            break  # busy, or caught up: the next commit starts the WAL over
                except sqlite3.Error:  # a busy or closing database: the next request, or the backstop, tries again
                    logger.debug("A WAL checkpoint of %s failed", self._path, exc_info=True)
        finally:
            conn.close()


__all__ = ["BACKSTOP_PAGES", "Checkpointer"]
