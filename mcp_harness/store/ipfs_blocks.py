"""The IPFS block store: UnixFS blocks by CID, the bytes in files under the data dir, indexed in SQLite.

**Why files, not BLOB rows.** A published file is hundreds of 256 KiB blocks. Kept in the database, every upload
would be one long write transaction holding the process's one connection (`store/db.py`) — every other verb waits
while 100 MiB go through the WAL — and the database, which is backed up and vacuumed as a whole, would grow by every
picture ever published. SQLite's own measurements put files ahead of BLOBs for reads above ~100 KB, too. So each
block is a file `<data_dir>/ipfs/<xx>/<cid>` (written to a temp file, fsynced, renamed: a reader sees all of a block
or none), and the table `ipfs_blocks` records which CIDs are here, in one short transaction per upload, after the
files are durable. A crash between the two leaves files nobody indexed; the next upload of the same bytes writes
them again, and nothing reads an unindexed file.

Blocks are public by design: only `write ipfs://` (publishing) and verified downloads put blocks here, and
`GET /ipfs/<cid>` serves them. A block read back is hashed against its CID again, so a file damaged on disk is
reported missing rather than served. Methods block; call them off the event loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from mcp_harness.errors import StorageError
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.unixfs import Imported, InvalidBlock, import_stream, verify_block
from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Connection, Store

logger = logging.getLogger(__name__)

BLOCKS_DIR = "ipfs"
"""The folder under the data dir that holds the block files."""
_STALE_TEMP_S = 3600  # a temp file this old belongs to a writer that died

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ipfs_blocks (
        cid TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        stored_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
)


def migrate(conn: Connection) -> None:
    """Create this store's schema."""
    for statement in SCHEMA:
        conn.execute(statement)


def _beside(db: Store) -> Path:
    # SQLite's file says where the data dir is; a PostgreSQL store knows the shared data root it was opened with.
    path = getattr(db, "path", None)
    if isinstance(path, Path):
        return path.parent / BLOCKS_DIR
    data_dir = getattr(db, "data_dir", None)
    if isinstance(data_dir, Path):
        return data_dir / BLOCKS_DIR
    raise StorageError(f"{type(db).__name__} has no data dir: give IpfsBlockStore its blocks' root.")


class IpfsBlockStore:
    """Blocks by CID. `root` defaults to `ipfs/` beside the database, in the data dir."""

    def __init__(self, db: Store, root: Path | None = None) -> None:
        self._db = db
        self.root = root if root is not None else _beside(db)
        self._swept = False

    def _path(self, cid: str) -> Path:
        # The last characters of a base32 CID vary; the first ("bafk…", "bafy…") do not.
        return self.root / cid[-3:-1] / cid

    def has(self, cid: CID | str) -> bool:
        with self._db.reading() as conn:
            return conn.execute("SELECT 1 FROM ipfs_blocks WHERE cid = ?", (str(cid),)).fetchone() is not None

    def get(self, cid: CID | str) -> bytes | None:
        """The block's bytes, checked against its CID; None when it is not here (or was damaged on disk)."""
        parsed = cid if isinstance(cid, CID) else CID.parse(cid)
        if not self.has(parsed):
            return None
        try:
            data = self._path(str(parsed)).read_bytes()
        except OSError:
            logger.warning("IPFS block %s is indexed but its file is missing", parsed)
            return None
        try:
            verify_block(parsed, data)
        except InvalidBlock:
            logger.warning("IPFS block %s is damaged on disk; treated as missing", parsed)
            return None
        return data

    def put(self, cid: CID, data: bytes) -> None:
        """Store one block after checking that it is what its CID names.

        Raises:
            InvalidBlock: `data` does not hash to `cid`.
        """
        verify_block(cid, data)
        with self.writer() as sink:
            sink(cid, data)

    def put_many(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        """Store verified blocks; indexed together once all their files are durable."""
        with self.writer() as sink:
            for cid, data in blocks:
                verify_block(cid, data)
                sink(cid, data)

    @contextlib.contextmanager
    def writer(self) -> Iterator[BlockSink]:
        """A sink for blocks already known to match their CIDs (the importer's own): files are written as blocks
        come, and indexed in one transaction when the block ends without an error."""
        sink = BlockSink(self)
        yield sink
        sink.commit()

    def _write_file(self, cid: str, data: bytes) -> None:
        path = self._path(cid)
        with contextlib.suppress(OSError):
            if path.read_bytes() == data:
                return  # content-addressed: already here (an upload that crashed before indexing left it)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._sweep()
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.root)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _sweep(self) -> None:
        if self._swept:
            return
        self._swept = True
        cutoff = time.time() - _STALE_TEMP_S
        for stale in self.root.glob(".tmp-*"):
            with contextlib.suppress(OSError):
                if stale.stat().st_mtime < cutoff:
                    stale.unlink()

    def _index(self, rows: list[tuple[str, int]], dirs: set[Path]) -> None:
        for directory in dirs:  # the renames themselves must survive a power cut before the index names them
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        stamp = now_ms()
        with self._db.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO ipfs_blocks (cid, size, stored_at) VALUES (?, ?, ?)",
                [(cid, size, stamp) for cid, size in rows],
            )


class BlockSink:
    """Collects the blocks of one upload: each file at once, the index rows at `commit`."""

    def __init__(self, store: IpfsBlockStore) -> None:
        self._store = store
        self._rows: dict[str, int] = {}
        self._dirs: set[Path] = set()

    def __call__(self, cid: CID, data: bytes) -> None:
        text = str(cid)
        if text in self._rows:
            return  # the same chunk twice in one file is one block
        self._store._write_file(text, data)  # pyright: ignore[reportPrivateUsage]
        self._rows[text] = len(data)
        self._dirs.add(self._store._path(text).parent)  # pyright: ignore[reportPrivateUsage]

    def commit(self) -> None:
        if self._rows:
            self._store._index(list(self._rows.items()), self._dirs)  # pyright: ignore[reportPrivateUsage]
            self._rows.clear()


def ipfs_upload(
    blocks: IpfsBlockStore | None, source: bytes | BinaryIO | Iterable[bytes], *, max_bytes: int | None = None
) -> Imported:
    """Import `source` as a UnixFS file: with a store, every block is kept there (indexed once all are written);
    without one (a dry run), the CID is computed and nothing is stored.

    Raises:
        OverflowError: the source is larger than `max_bytes`; no block of it is indexed.
    """
    pieces: BinaryIO | Iterable[bytes] = [source] if isinstance(source, bytes | bytearray) else source
    if blocks is None:
        return import_stream(pieces, max_bytes=max_bytes)
    with blocks.writer() as sink:
        return import_stream(pieces, sink, max_bytes=max_bytes)
