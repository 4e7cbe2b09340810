"""What memory reads and listings return: entries, file contents, listings, the top-level summary."""

from __future__ import annotations

import mimetypes
import os
from dataclasses import dataclass

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


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryEntry:
    """One file or directory in a listing."""

    path: str
    """Relative to the memory root, `/`-joined; escaped when not addressable (space/paths.py)."""
    type: str
    """`file` or `dir`."""
    size: int
    """Bytes (0 for directories)."""
    updated_at: int
    """Modification time, epoch milliseconds."""
    mime_type: str | None = None
    entry_count: int | None = None
    """For directories: how many names it holds."""
    addressable: bool = True
    """False when no address can name it (a name only sandboxed code could create); `path` is then escaped."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "type": self.type, "size": self.size, "updatedAt": self.updated_at}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.entry_count is not None:
            out["entryCount"] = self.entry_count
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
class TopLevelSummary:
    """Root files and directories with recursive counts, for `~/self` and the space index."""

    total_files: int
    top_level: list[str]
    unaddressable: int = 0
    """Files (anywhere in the tree) that no address can name."""

    @classmethod
    def of(cls, files: list[MemoryEntry]) -> TopLevelSummary:
        """Root files, and root directories with their recursive file counts, byte totals and unaddressable files."""
        dirs: dict[str, list[int]] = {}
        top: list[str] = []
        for entry in files:
            head, sep, _ = entry.path.partition("/")
            if sep:
                agg = dirs.setdefault(head, [0, 0, 0])
                agg[0] += 1
                agg[1] += entry.size
                agg[2] += not entry.addressable
            else:
                top.append(entry.path + ("" if entry.addressable else " (not addressable)"))
        lines = [
            f"{name}/ ({n} file{'s' if n != 1 else ''}, {b} bytes{f'; {bad} not addressable' if bad else ''})"
            for name, (n, b, bad) in sorted(dirs.items())
        ]
        bad = sum(1 for e in files if not e.addressable)
        return cls(total_files=len(files), top_level=lines + top, unaddressable=bad)
