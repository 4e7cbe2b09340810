"""Conversation attachments (HARNESS §11.2, issue 18): a session's files, content-addressed by SHA-256.

The bytes live once under `<data_dir>/attachments/<id[:2]>/<id>`, whatever number of sessions hold them; a row per
(session, id) says which session holds which file under which name. An id is the 64-hex SHA-256 of the bytes.

`add` streams its source: the bytes go to a temp file beside the store while they are hashed, never more than
`max_bytes` of them (a source that has more is refused as soon as the byte past the limit is read, and its temp
file removed), and the finished file is renamed into place, so a reader never sees half a file. Who may add to or
read a session's attachments is the session's question (`scope.py`); this store takes session ids already checked.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mcp_harness.errors import BadRequest, Conflict, TooLarge
from mcp_harness.memory.entries import mime_for
from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Connection, Store

ID_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_ATTACHMENT_BYTES = 100 * 1024 * 1024
"""The reference's cap per attachment (`session-attachments.ts:26`)."""
MAX_PER_SESSION = 200
CHUNK_BYTES = 1024 * 1024
MAX_NAME_BYTES = 200
"""Short enough that `attachments/<name>` is a valid memory path (255 bytes a name)."""
STALE_TEMP_S = 3600
"""A temp file this old belongs to a writer that died (another process may be streaming a younger one)."""
TEMP_DIR = ".incoming"
SWEEP_BATCH = 500
"""Stored files checked against the rows per transaction of `sweep` (SQLite takes up to 32,766 parameters)."""
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\\\\/]")
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def migrate(conn: Connection) -> None:
    """Create this store's schema (m018_attachments)."""
    conn.execute(
        """
        CREATE TABLE attachments (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            id TEXT NOT NULL CHECK (length(id) = 64),
            name TEXT NOT NULL,
            mime_type TEXT NOT NULL,
            size INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (session_id, id)
        ) WITHOUT ROWID
        """
    )


class Source(Protocol):
    """What `add` streams from: a binary file (`BinaryIO`), a request body, anything with a blocking `read`."""

    def read(self, size: int = ..., /) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class AttachmentRecord:
    """One file a session holds."""

    id: str
    """The SHA-256 of the bytes, 64 lowercase hex characters."""
    session_id: str
    name: str
    mime_type: str
    size: int
    created_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sessionId": self.session_id,
            "name": self.name,
            "mimeType": self.mime_type,
            "size": self.size,
            "createdAt": self.created_at,
            "address": f"attachment:{self.id}",
        }


def check_id(attachment_id: object) -> str:
    """The id if it is 64 lowercase hex characters, else a BadRequest saying what an id is."""
    if isinstance(attachment_id, str) and ID_RE.match(attachment_id):
        return attachment_id
    shown = repr(attachment_id)[:80]
    raise BadRequest(
        f"An attachment id is 64 lowercase hex characters (the SHA-256 of its bytes); got {shown}. "
        "`mcp-harness attach` and POST /mcp/sessions/<id>/attachments print the ids."
    )


def clean_name(name: str | None, fallback: str) -> str:
    """A file name safe as one memory path segment: the last path component, no control characters, bounded."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE.sub("-", base).strip()
    base = base.encode("utf-8", "ignore")[:MAX_NAME_BYTES].decode("utf-8", "ignore").strip()
    if base in ("", ".", "..") or base.startswith(".mcp-harness-tmp-"):
        return fallback
    return base


def sniff_mime(head: bytes) -> str | None:
    """The image type the first bytes announce (PNG, JPEG, GIF, WebP), else None."""
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


class AttachmentStore:
    """Attachments of every session of one database, their bytes under `root`."""

    def __init__(self, db: Store, root: Path) -> None:
        self.db = db
        self.root = root
        self._swept = False

    # -- reads ---------------------------------------------------------------------------------------------------

    def get(self, session_id: str, attachment_id: str) -> AttachmentRecord | None:
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT * FROM attachments WHERE session_id = ? AND id = ?", (session_id, attachment_id)
            ).fetchone()
        return _record(row) if row is not None else None

    def list(self, session_id: str) -> list[AttachmentRecord]:
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM attachments WHERE session_id = ? ORDER BY created_at, id", (session_id,)
            ).fetchall()
        return [_record(r) for r in rows]

    def count(self, session_id: str) -> int:
        with self.db.reading() as conn:
            return int(
                conn.execute("SELECT count(*) FROM attachments WHERE session_id = ?", (session_id,)).fetchone()[0]
            )

    def path(self, record: AttachmentRecord) -> Path:
        """Where the bytes are (content-addressed: the same file for every session holding them)."""
        return self.root / record.id[:2] / record.id

    def read_bytes(self, record: AttachmentRecord) -> bytes:
        return self.path(record).read_bytes()

    # -- writes --------------------------------------------------------------------------------------------------

    def add(
        self,
        session_id: str,
        name: str | None,
        mime_type: str | None,
        source: Source,
        max_bytes: int = MAX_ATTACHMENT_BYTES,
    ) -> AttachmentRecord:
        """Stream `source` into the store and record it as the session's. Adding bytes the session already holds
        returns the record it has (its first name stays).

        Raises:
            TooLarge: the source holds more than `max_bytes` (nothing is kept).
            Conflict: the session already holds MAX_PER_SESSION attachments.
        """
        limit = min(max_bytes, MAX_ATTACHMENT_BYTES)
        if self.count(session_id) >= MAX_PER_SESSION:
            raise _full(session_id)
        temp, digest, size, head = self._receive(source, limit)
        attachment_id = digest
        clean = clean_name(name, f"attachment-{attachment_id[:12]}")
        record = AttachmentRecord(attachment_id, session_id, clean, _mime(mime_type, head, clean), size, now_ms())
        try:
            # The file is put in place under the write lock, with its row: `sweep` deletes a file no row holds under
            # the same lock, so it can never take bytes an add found already there but has not yet recorded.
            with self.db.transaction() as conn:
                row = conn.execute(
                    "SELECT * FROM attachments WHERE session_id = ? AND id = ?", (session_id, attachment_id)
                ).fetchone()
                if row is not None:
                    return _record(row)
                held = conn.execute("SELECT count(*) FROM attachments WHERE session_id = ?", (session_id,)).fetchone()[
                    0
                ]
                if held >= MAX_PER_SESSION:
                    raise _full(session_id)
                final = self.root / attachment_id[:2] / attachment_id
                if not final.exists():  # else the same bytes are there already: the name says so (SHA-256)
                    final.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(temp, final)
                    _fsync_dir(final.parent)
                conn.execute(
                    "INSERT INTO attachments (session_id, id, name, mime_type, size, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, record.id, record.name, record.mime_type, record.size, record.created_at),
                )
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()  # gone when it was renamed into place
        return record

    def sweep(self, *, dry_run: bool = False) -> tuple[int, int]:
        """Delete the files no session holds any more (their sessions or agents were deleted) and temp files a
        killed writer left; returns (files, bytes) deleted, or that would be with `dry_run`."""
        files = size = 0
        incoming = self.root / TEMP_DIR
        cutoff = time.time() - STALE_TEMP_S
        for leftover in incoming.glob("*.part") if incoming.is_dir() else ():
            with contextlib.suppress(OSError):
                st = leftover.stat()
                if st.st_mtime < cutoff:
                    if not dry_run:
                        leftover.unlink()
                    files, size = files + 1, size + st.st_size
        stored = [f for d in sorted(self.root.glob("??")) for f in sorted(d.iterdir()) if ID_RE.match(f.name)]
        for start in range(0, len(stored), SWEEP_BATCH):
            batch = {f.name: f for f in stored[start : start + SWEEP_BATCH]}
            with self.db.transaction() as conn:
                marks = ", ".join("?" * len(batch))
                held = {r[0] for r in conn.execute(f"SELECT id FROM attachments WHERE id IN ({marks})", [*batch])}
                for attachment_id, path in batch.items():
                    if attachment_id in held:
                        continue
                    with contextlib.suppress(OSError):
                        bytes_ = path.stat().st_size
                        if not dry_run:
                            path.unlink()
                        files, size = files + 1, size + bytes_
        return files, size

    def _receive(self, source: Source, limit: int) -> tuple[Path, str, int, bytes]:
        """Copy at most `limit` bytes of `source` to a fresh temp file, hashing them; refuse a source with more."""
        incoming = self.root / TEMP_DIR
        incoming.mkdir(parents=True, exist_ok=True)
        self._sweep(incoming)
        temp = incoming / f"{uuid.uuid4().hex}.part"
        sha = hashlib.sha256()
        size = 0
        head = b""
        try:
            with temp.open("xb") as out:
                while True:
                    # Never more than one byte past the limit is asked for, so no more than `limit` is written.
                    chunk = source.read(min(CHUNK_BYTES, limit + 1 - size))
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > limit:
                        raise TooLarge(
                            f"The attachment is over {limit} bytes ({limit // (1024 * 1024)} MiB), the limit for one "
                            "file; nothing was stored."
                        )
                    if len(head) < 16:
                        head = (head + chunk)[:16]
                    sha.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        return temp, sha.hexdigest(), size, head

    def _sweep(self, incoming: Path) -> None:
        """Once per store: remove temp files a killed writer left (old enough that no live writer owns them)."""
        if self._swept:
            return
        self._swept = True
        cutoff = time.time() - STALE_TEMP_S
        for leftover in incoming.glob("*.part"):
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < cutoff:
                    leftover.unlink()


def _record(row: Any) -> AttachmentRecord:
    return AttachmentRecord(
        id=row["id"],
        session_id=row["session_id"],
        name=row["name"],
        mime_type=row["mime_type"],
        size=row["size"],
        created_at=row["created_at"],
    )


def _mime(given: str | None, head: bytes, name: str) -> str:
    """The declared type; when it says nothing (absent, octet-stream), what the bytes announce, else the name."""
    declared = (given or "").split(";", 1)[0].strip().lower()
    if declared and declared != "application/octet-stream":
        return declared
    return sniff_mime(head) or mime_for(name) or "application/octet-stream"


def _full(session_id: str) -> Conflict:
    return Conflict(
        f"Thread {session_id} already holds {MAX_PER_SESSION} attachments, the most one conversation keeps."
    )


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "MAX_ATTACHMENT_BYTES",
    "MAX_PER_SESSION",
    "AttachmentRecord",
    "AttachmentStore",
    "Source",
    "check_id",
    "clean_name",
    "migrate",
    "sniff_mime",
]
