"""One agent's memory tree: lstat-based reads, atomic whole-file writes, bounded listings.

Symlinks are never followed anywhere on a path, so nothing a sandboxed program plants in the tree can make a verb
read or write outside it. All methods block; callers run them off the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import threading
from pathlib import Path

from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.memory import listing, temps, walk
from mcp_harness.memory.entries import (
    DirPage,
    MemoryEntry,
    MemoryFile,
    MemoryListing,
    TopLevelSummary,
    make_entry,
    mime_for,
)
from mcp_harness.memory.paths import TMP_PREFIX, display_name, is_addressable

__all__ = ["DirPage", "MemoryEntry", "MemoryFile", "MemoryListing", "MemoryStore", "TopLevelSummary", "mime_for"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class MemoryStore:
    """The memory tree rooted at one directory. Paths given to it are already normalized.

    Every operation walks the path one component at a time from a descriptor of the root, opening each directory
    with `O_NOFOLLOW | O_DIRECTORY` relative to its parent. A check and the use that follows it therefore act on the
    same inode: a sandboxed program racing to swap a directory for a symlink gets a refusal, never an escape. Files
    are opened `O_NONBLOCK`, so a FIFO planted in memory cannot hang a read.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._swept = False
        self._sweep_lock = threading.Lock()
        self._walks = walk.WalkCache()

    # -- path walking -------------------------------------------------------------------------------------

    def _ready(self) -> None:
        """Create the root, and on this store's first use remove temp files killed writers left (memory/temps.py)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self._swept:
            return
        with self._sweep_lock:
            if not self._swept:
                temps.sweep_stale(self.root)
                self._swept = True

    def _root_fd(self) -> int:
        self._ready()
        return os.open(self.root, _DIR_FLAGS)

    def _walk(self, parts: list[str], *, create: bool = False, path: str) -> int:
        """A descriptor of the directory `parts` (relative to the root); the caller closes it.

        Raises:
            NotFound: a component is missing (and `create` is off), a symlink, or not a directory.
            BadRequest: with `create`, a component exists but is not a directory.
        """
        fd = self._root_fd()
        try:
            for i, part in enumerate(parts):
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=fd)
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except (FileNotFoundError, NotADirectoryError, OSError) as exc:
                    if create and not isinstance(exc, FileNotFoundError):
                        where = "/".join(parts[: i + 1])
                        raise BadRequest(f"Cannot write {path}: {where} is not a directory.") from None
                    if isinstance(exc, FileNotFoundError | NotADirectoryError) or exc.errno == errno.ELOOP:
                        raise NotFound(f"Memory path not found: {path}.") from None
                    raise
                os.close(fd)
                fd = child
            return fd
        except BaseException:
            os.close(fd)
            raise

    @staticmethod
    def _split(path: str) -> tuple[list[str], str]:
        parts = path.split("/")
        return parts[:-1], parts[-1]

    def open_dir(self, parts: list[str]) -> int | None:
        """A descriptor of the directory `parts`, or None when it is missing or not a directory; the caller closes
        it."""
        try:
            return self._walk(parts, path="/".join(parts))
        except NotFound:
            return None

    # -- reads ---------------------------------------------------------------------------------------------

    def read_file(self, path: str) -> MemoryFile:
        """Read one file.

        Raises:
            NotFound: nothing (or a symlink, or something other than a regular file) is there.
            BadRequest: the path is a directory.
        """
        parents, name = self._split(path)
        try:
            dir_fd = self._walk(parents, path=path)
        except NotFound:
            raise NotFound(f"Memory file not found: {path}") from None
        try:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                raise NotFound(f"Memory file not found: {path}") from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise NotFound(f"Memory file not found: {path} (symlinks are not followed).") from None
                raise
        finally:
            os.close(dir_fd)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise BadRequest(f"{path} is a directory, not a file. Read ~/memory/{path}/ to list it.")
            if not stat.S_ISREG(st.st_mode):
                raise NotFound(f"Memory file not found: {path} (not a regular file).")
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
            st = os.fstat(fh.fileno())
        text: str | None = None
        if b"\x00" not in data:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        return MemoryFile(entry=make_entry(path, st), data=data, text=text)

    def list_dir(self, path: str) -> MemoryListing:
        """List one whole directory level, statting every entry, skipping symlinks, special files and temp files.
        Verbs page with `page_dir` instead, which stats only the page.

        A name no address can carry is still listed, escaped and flagged (memory/paths.py), so it never costs the
        rest of the listing.

        Raises:
            NotFound: the directory is missing (the root always exists).
            BadRequest: the path is a file.
        """
        parts = path.split("/") if path else []
        dir_fd = self.open_listing(path)
        entries: list[MemoryEntry] = []
        try:
            for name in os.listdir(dir_fd):
                if name.startswith(TMP_PREFIX):
                    continue
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                    ok = is_addressable([*parts, name])
                    rel = f"{path}/{display_name(name)}" if path else display_name(name)
                    entries.append(make_entry(rel, st, dir_fd=dir_fd, name=name, addressable=ok))
        finally:
            os.close(dir_fd)
        entries.sort(key=lambda e: e.path)
        total = sum(e.size for e in entries if e.type == "file")
        return MemoryListing(path=path, entries=entries, total_bytes=total)

    def open_listing(self, path: str) -> int:
        """A descriptor of the directory a listing of `path` reads; the caller closes it.

        Raises:
            NotFound: the directory is missing (the root always exists).
            BadRequest: the path is a file.
        """
        try:
            return self._walk(path.split("/") if path else [], path=path)
        except NotFound:
            if path and self._is_file(path):
                message = f"{path} is a file, not a directory. Read ~/memory/{path} without the slash."
                raise BadRequest(message) from None
            raise NotFound(f"Memory directory not found: {path}") from None

    def page_dir(self, path: str, after: str | None, limit: int) -> DirPage:
        """Up to `limit` entries of one level after the entry path `after`, statting only those (memory/listing.py).

        Raises:
            NotFound: the directory is missing.
            BadRequest: the path is a file.
        """
        return listing.page_dir(self, path, after, limit)

    def files_page(
        self, after: str | None, limit: int, max_bytes: int | None = None
    ) -> tuple[list[walk.WalkedFile], str | None]:
        """Up to `limit` addressable files in path order after the path `after` (fewer when their paths would pass
        `max_bytes`), and the cursor of the next page (None at the end). Consecutive pages continue one walk of the
        tree (memory/walk.py)."""
        self._ready()
        return self._walks.page(self, after, limit, max_bytes)

    def _is_file(self, path: str) -> bool:
        parents, name = self._split(path)
        try:
            dir_fd = self._walk(parents, path=path)
        except NotFound:
            return False
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            return False
        finally:
            os.close(dir_fd)

    def summarize_top_level(self) -> TopLevelSummary:
        """Root files, and root directories with recursive file counts and byte totals, within a bounded walk."""
        return listing.summarize(self)

    # -- writes --------------------------------------------------------------------------------------------

    def write_file(self, path: str, data: bytes) -> MemoryEntry:
        """Replace the whole file atomically: temp file, fsync, rename, fsync of the directory.

        Raises:
            BadRequest: the target is a directory or a symlink, or a parent is not a directory.
        """
        parents, name = self._split(path)
        dir_fd = self._walk(parents, create=True, path=path)
        try:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise BadRequest(f"{path} is not writable: it is a symlink.")
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise BadRequest(f"{path} is a directory; write to a file path inside it, or delete it first.")
            tmp, fd = temps.create_locked(dir_fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                    # rename() replaces whatever name is there (even a symlink planted since the check) and never
                    # follows it, so the write cannot land outside the tree. It happens while the temp file is
                    # still open and locked, so another process's sweep never takes it (memory/temps.py).
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            os.fsync(dir_fd)
            return make_entry(path, os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
        finally:
            os.close(dir_fd)

    def delete(self, path: str) -> bool:
        """Remove a file, a symlink (itself) or a directory tree. False when nothing was there."""
        parents, name = self._split(path)
        try:
            dir_fd = self._walk(parents, path=path)
        except NotFound:
            return False
        try:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if stat.S_ISDIR(st.st_mode):
                # rmtree with dir_fd works on descriptors throughout and never follows a symlink inside the tree.
                shutil.rmtree(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
            return True
        finally:
            os.close(dir_fd)
