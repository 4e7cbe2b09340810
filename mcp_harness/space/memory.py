"""One agent's memory tree: lstat-based reads, atomic whole-file writes, one-level listings.

Symlinks are never followed anywhere on a path, so nothing a sandboxed program plants in the tree can make a verb
read or write outside it. All methods block; callers run them off the event loop.
"""

from __future__ import annotations

import mimetypes
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from mcp_harness.errors import BadRequest, NotFound

_TMP_PREFIX = ".mcp-harness-tmp-"
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
    """A file's content: `text` when it is UTF-8 without NUL, else None (binary)."""

    entry: MemoryEntry
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
    """The memory tree rooted at one directory. Paths given to it are already normalized."""

    def __init__(self, root: Path) -> None:
        self.root = root

    # -- path walking -------------------------------------------------------------------------------------

    def _lstat_chain(self, path: str, *, allow_final_link: bool = False) -> os.stat_result | None:
        """lstat the target, refusing a symlink anywhere on the way. None when something is missing."""
        current = self.root
        st: os.stat_result | None = None
        parts = path.split("/") if path else []
        for i, part in enumerate(parts):
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                return None
            except NotADirectoryError:
                return None
            if stat.S_ISLNK(st.st_mode) and not (allow_final_link and i == len(parts) - 1):
                raise NotFound(f"Memory file not found: {path} (symlinks are not followed).")
            if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
                return None
        return st

    def _entry(self, path: str, st: os.stat_result) -> MemoryEntry:
        if stat.S_ISDIR(st.st_mode):
            count = sum(1 for name in os.listdir(self.root / path) if not name.startswith(_TMP_PREFIX))
            return MemoryEntry(path=path, type="dir", size=0, updated_at=_ms(st), entry_count=count)
        return MemoryEntry(path=path, type="file", size=st.st_size, updated_at=_ms(st), mime_type=mime_for(path))

    # -- reads ---------------------------------------------------------------------------------------------

    def read_file(self, path: str) -> MemoryFile:
        """Read one file.

        Raises:
            NotFound: nothing (or a symlink) is there.
            BadRequest: the path is a directory.
        """
        st = self._lstat_chain(path)
        if st is None:
            raise NotFound(f"Memory file not found: {path}")
        if stat.S_ISDIR(st.st_mode):
            raise BadRequest(f"{path} is a directory, not a file. Read ~/memory/{path}/ to list it.")
        if not stat.S_ISREG(st.st_mode):
            raise NotFound(f"Memory file not found: {path} (not a regular file).")
        fd = os.open(self.root / path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
            st = os.fstat(fh.fileno())
        text: str | None = None
        if b"\x00" not in data:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        return MemoryFile(entry=self._entry(path, st), text=text)

    def list_dir(self, path: str) -> MemoryListing:
        """List one directory level, skipping symlinks.

        Raises:
            NotFound: the directory is missing (the root always exists).
            BadRequest: the path is a file.
        """
        if path == "":
            self.root.mkdir(parents=True, exist_ok=True)
        else:
            st = self._lstat_chain(path)
            if st is None:
                raise NotFound(f"Memory directory not found: {path}")
            if not stat.S_ISDIR(st.st_mode):
                raise BadRequest(f"{path} is a file, not a directory. Read ~/memory/{path} without the slash.")
        entries: list[MemoryEntry] = []
        base = self.root / path if path else self.root
        for name in os.listdir(base):
            if name.startswith(_TMP_PREFIX):
                continue
            rel = f"{path}/{name}" if path else name
            try:
                st = os.lstat(base / name)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                entries.append(self._entry(rel, st))
        entries.sort(key=lambda e: e.path)
        total = sum(e.size for e in entries if e.type == "file")
        return MemoryListing(path=path, entries=entries, total_bytes=total)

    def iter_files(self) -> list[MemoryEntry]:
        """Every regular file in the tree, sorted by path (symlinked directories are not entered)."""
        out: list[MemoryEntry] = []
        if not self.root.is_dir():
            return out
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            rel_dir = os.path.relpath(dirpath, self.root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
            for name in filenames:
                if name.startswith(_TMP_PREFIX):
                    continue
                st = os.lstat(os.path.join(dirpath, name))
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

    def _ensure_parents(self, path: str) -> Path:
        current = self.root
        current.mkdir(parents=True, exist_ok=True)
        for part in path.split("/")[:-1]:
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                try:
                    os.mkdir(current)
                except FileExistsError:
                    pass  # a concurrent writer made it; re-checked below
                st = os.lstat(current)
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                raise BadRequest(f"Cannot write {path}: {os.path.relpath(current, self.root)} is not a directory.")
        return current

    def write_file(self, path: str, data: bytes) -> MemoryEntry:
        """Replace the whole file atomically: temp file, fsync, rename, fsync of the directory.

        Raises:
            BadRequest: the target is a directory or a symlink, or a parent is not a directory.
        """
        parent = self._ensure_parents(path)
        target = self.root / path
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise BadRequest(f"{path} is not writable: it is a symlink.")
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise BadRequest(f"{path} is a directory; write to a file path inside it, or delete it first.")
        tmp = parent / f"{_TMP_PREFIX}{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        dir_fd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return self._entry(path, os.lstat(target))

    def delete(self, path: str) -> bool:
        """Remove a file, a symlink (itself) or a directory tree. False when nothing was there."""
        target = self.root / path
        st = self._lstat_chain(path, allow_final_link=True)
        if st is None:
            return False
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(target)
        else:
            os.unlink(target)
        return True
