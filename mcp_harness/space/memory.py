"""One agent's memory tree: lstat-based reads, atomic whole-file writes, one-level listings.

Symlinks are never followed anywhere on a path, so nothing a sandboxed program plants in the tree can make a verb
read or write outside it. All methods block; callers run them off the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import mimetypes
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from mcp_harness.errors import BadRequest, NotFound

_TMP_PREFIX = ".mcp-harness-tmp-"
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
    return _EXTRA_TYPES.get(ext) or mimetypes.guess_type(path, strict=False)[0]


def _ms(st: os.stat_result) -> int:
    return round(st.st_mtime_ns / 1_000_000)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryEntry:
    """One file or directory in a listing."""

    path: str
    """Relative to the memory root, `/`-joined."""
    type: str
    """`file` or `dir`."""
    size: int
    """Bytes (0 for directories)."""
    updated_at: int
    """Modification time, epoch milliseconds."""
    mime_type: str | None = None
    entry_count: int | None = None
    """For directories: how many names it holds."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "type": self.type, "size": self.size, "updatedAt": self.updated_at}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.entry_count is not None:
            out["entryCount"] = self.entry_count
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


@dataclass(frozen=True, kw_only=True, slots=True)
class TopLevelSummary:
    """Root files and directories with recursive counts, for `~/self` and the space index."""

    total_files: int
    top_level: list[str]


class MemoryStore:
    """The memory tree rooted at one directory. Paths given to it are already normalized.

    Every operation walks the path one component at a time from a descriptor of the root, opening each directory
    with `O_NOFOLLOW | O_DIRECTORY` relative to its parent. A check and the use that follows it therefore act on the
    same inode: a sandboxed program racing to swap a directory for a symlink gets a refusal, never an escape. Files
    are opened `O_NONBLOCK`, so a FIFO planted in memory cannot hang a read.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    # -- path walking -------------------------------------------------------------------------------------

    def _root_fd(self) -> int:
        self.root.mkdir(parents=True, exist_ok=True)
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

    def _entry(self, path: str, st: os.stat_result, *, dir_fd: int | None = None, name: str = "") -> MemoryEntry:
        if stat.S_ISDIR(st.st_mode):
            count = 0
            if dir_fd is not None:
                with contextlib.suppress(OSError):
                    sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                    try:
                        count = sum(1 for n in os.listdir(sub) if not n.startswith(_TMP_PREFIX))
                    finally:
                        os.close(sub)
            return MemoryEntry(path=path, type="dir", size=0, updated_at=_ms(st), entry_count=count)
        return MemoryEntry(path=path, type="file", size=st.st_size, updated_at=_ms(st), mime_type=mime_for(path))

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
        return MemoryFile(entry=self._entry(path, st), data=data, text=text)

    def list_dir(self, path: str) -> MemoryListing:
        """List one directory level, skipping symlinks and special files.

        Raises:
            NotFound: the directory is missing (the root always exists).
            BadRequest: the path is a file.
        """
        parts = path.split("/") if path else []
        try:
            dir_fd = self._walk(parts, path=path)
        except NotFound:
            if parts and self._is_file(path):
                message = f"{path} is a file, not a directory. Read ~/memory/{path} without the slash."
                raise BadRequest(message) from None
            raise NotFound(f"Memory directory not found: {path}") from None
        entries: list[MemoryEntry] = []
        try:
            for name in os.listdir(dir_fd):
                if name.startswith(_TMP_PREFIX):
                    continue
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                rel = f"{path}/{name}" if path else name
                if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                    entries.append(self._entry(rel, st, dir_fd=dir_fd, name=name))
        finally:
            os.close(dir_fd)
        entries.sort(key=lambda e: e.path)
        total = sum(e.size for e in entries if e.type == "file")
        return MemoryListing(path=path, entries=entries, total_bytes=total)

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

    def iter_files(self) -> list[MemoryEntry]:
        """Every regular file in the tree, sorted by path (symlinked directories are not entered)."""
        out: list[MemoryEntry] = []
        if not self.root.is_dir():
            return out
        for dirpath, _dirnames, filenames, dir_fd in os.fwalk(self.root, follow_symlinks=False):
            rel_dir = os.path.relpath(dirpath, self.root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            for name in filenames:
                if name.startswith(_TMP_PREFIX):
                    continue
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    out.append(self._entry(rel, st))
        out.sort(key=lambda e: e.path)
        return out

    def summarize_top_level(self) -> TopLevelSummary:
        """Root files, and root directories with their recursive file counts and byte totals."""
        files = self.iter_files()
        dirs: dict[str, list[int]] = {}
        top: list[str] = []
        for entry in files:
            head, sep, _ = entry.path.partition("/")
            if sep:
                agg = dirs.setdefault(head, [0, 0])
                agg[0] += 1
                agg[1] += entry.size
            else:
                top.append(entry.path)
        lines = [f"{name}/ ({n} file{'s' if n != 1 else ''}, {b} bytes)" for name, (n, b) in sorted(dirs.items())]
        return TopLevelSummary(total_files=len(files), top_level=lines + top)

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
            tmp = f"{_TMP_PREFIX}{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                # rename() replaces whatever name is there (even a symlink planted since the check) and never
                # follows it, so the write cannot land outside the tree.
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            os.fsync(dir_fd)
            return self._entry(path, os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
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
