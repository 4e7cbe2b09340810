"""UnixFS files: the importer that turns bytes into IPFS blocks, and the reader that walks and verifies them.

The importer builds exactly the DAG `ipfs-unixfs-importer` 15.4 builds by default (HYPERMEDIA §5), so a CID computed
here equals the one the Seed JS client and a Go Seed node compute for the same bytes (tests/hypermedia/
test_unixfs.py checks it against the npm package):

- fixed-size chunks of 262 144 bytes; each chunk a raw block (codec raw, CIDv1, sha2-256);
- a file of one chunk (or none: the empty file) is that raw block alone;
- otherwise a balanced tree: leaves in batches of 174 under dag-pb nodes (CIDv1), those nodes in batches of 174
  under the next level, until one node remains. A last batch of one still gets its own parent, as in JS;
- a node's `Data` is UnixFS `{Type: File, filesize, blocksizes}` (no mtime, no mode), its links
  `{Hash, Name: "", Tsize}` where `Tsize` is the child's whole DAG size (its block plus everything under it).

The importer streams: it holds one partial chunk and at most 174 pending links per tree level, and hands each block
to a sink as soon as it exists, so importing a file of any size takes bounded memory.

The reader accepts what other importers build too (dag-pb leaves holding data, CIDv0, `Raw` nodes), because a
gateway may serve a file this importer did not make. Every block it is given is hashed against its CID before it is
decoded; one that does not match is refused, never passed on. The protobufs are written by hand: they are two small
messages, and a generic protobuf library would cost more to check than the fifty lines here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, cast

from mcp_harness.hypermedia.cid import CID, DAG_PB, RAW, SHA2_256, varint

CHUNK_SIZE = 262_144
"""The fixed-size chunker's default (`chunker/fixed-size.ts`)."""
MAX_LINKS = 174
"""The balanced layout's default children per node (`layout/balanced.ts`)."""
_FILE = 2
_RAW = 0
_MAX_DEPTH = 32  # 174**32 chunks is far beyond any file; stops a hostile DAG that links in circles
_SHA256_PREFIX = bytes((SHA2_256, 32))

Sink = Callable[[CID, bytes], None]
"""Where the importer puts each block as it is made: `(cid, block bytes)`."""
Fetch = Callable[[CID], bytes]
"""Where the reader gets a block's bytes by CID (a store, a gateway); it verifies them itself."""


class InvalidBlock(ValueError):
    """A block that does not hash to its CID, or is not a UnixFS file block."""


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a DAG: its CID and bytes."""

    cid: CID
    data: bytes


@dataclass(frozen=True, slots=True)
class Imported:
    """What an import produced: the root CID and the file's size in bytes."""

    cid: CID
    size: int


@dataclass(frozen=True, slots=True)
class _Link:
    cid: CID
    tsize: int
    """The child's DAG size: its block plus all blocks under it (the link's `Tsize`)."""
    filesize: int
    """The file bytes under the child (its entry in the parent's `blocksizes`)."""


def _raw_cid(chunk: bytes | memoryview) -> CID:
    return CID(1, RAW, _SHA256_PREFIX + hashlib.sha256(chunk).digest())


def encode_file_node(links: Iterable[tuple[CID, int, int]]) -> bytes:
    """The dag-pb block of a UnixFS File node over `(child cid, child DAG size, child file bytes)` links, byte for
    byte as `@ipld/dag-pb` encodes `ipfs-unixfs`'s marshalled Data: PBNode Links (field 2) before Data (field 1)."""
    out = bytearray()
    total = 0
    sizes = bytearray()
    for cid, tsize, filesize in links:
        digest = cid.to_bytes()
        body = b"\x0a" + varint(len(digest)) + digest + b"\x12\x00\x18" + varint(tsize)
        out += b"\x12" + varint(len(body)) + body
        sizes += b"\x20" + varint(filesize)
        total += filesize
    data = b"\x08\x02\x18" + varint(total) + bytes(sizes)
    out += b"\x0a" + varint(len(data)) + data
    return bytes(out)


class Importer:
    """A streaming UnixFS importer: `write` bytes in any pieces, then `finish` for the root.

    Each block goes to `sink` (None: blocks are only hashed, as a dry run needs) the moment it is complete.
    """

    def __init__(self, sink: Sink | None = None) -> None:
        self._sink = sink
        self._buffer = bytearray()
        self._levels: list[list[_Link]] = [[]]
        self._counts: list[int] = [0]
        self._first: tuple[CID, bytes] | None = None
        """The first leaf, held back: if it is the only one, it is the file (and its block is kept for the sink)."""
        self.size = 0
        """Bytes written so far."""
        self._finished = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes to the file; every complete chunk becomes a leaf block at once."""
        if self._finished:
            raise RuntimeError("this import is already finished")
        view = memoryview(data).cast("B")
        self.size += len(view)
        if self._buffer:
            need = CHUNK_SIZE - len(self._buffer)
            self._buffer += view[:need]
            view = view[need:]
            if len(self._buffer) < CHUNK_SIZE:
                return
            self._leaf(bytes(self._buffer))
            self._buffer.clear()
        while len(view) >= CHUNK_SIZE:
            self._leaf(view[:CHUNK_SIZE])
            view = view[CHUNK_SIZE:]
        if len(view):
            self._buffer += view

    def _leaf(self, chunk: bytes | memoryview) -> None:
        cid = _raw_cid(chunk)
        if self._counts[0] == 0:
            # Held back until a second chunk shows the file needs a tree: a single chunk is the whole file.
            self._first = (cid, bytes(chunk))
        else:
            if self._first is not None:
                self._emit(*self._first)
                self._first = None
            self._emit(cid, bytes(chunk) if self._sink is not None else b"")
        self._push(0, _Link(cid, len(chunk), len(chunk)))

    def _emit(self, cid: CID, data: bytes) -> None:
        if self._sink is not None:
            self._sink(cid, data)

    def _push(self, level: int, link: _Link) -> None:
        # Raw leaves of no bytes get no link (JS filters them); only the empty file has one, and it is never a tree.
        if len(self._levels) == level:
            self._levels.append([])
            self._counts.append(0)
        self._levels[level].append(link)
        self._counts[level] += 1
        if len(self._levels[level]) == MAX_LINKS:
            self._reduce(level)

    def _reduce(self, level: int) -> None:
        links = [link for link in self._levels[level] if link.filesize > 0]
        self._levels[level] = []
        block = encode_file_node((link.cid, link.tsize, link.filesize) for link in links)
        cid = CID(1, DAG_PB, _SHA256_PREFIX + hashlib.sha256(block).digest())
        self._emit(cid, block)
        tsize = len(block) + sum(link.tsize for link in links)
        self._push(level + 1, _Link(cid, tsize, sum(link.filesize for link in links)))

    def finish(self) -> Imported:
        """Flush the last chunk and close every level of the tree; the root CID and the file size."""
        if self._finished:
            raise RuntimeError("this import is already finished")
        self._finished = True
        if self._buffer or self._counts[0] == 0:
            self._leaf(bytes(self._buffer))  # the chunker yields one (possibly empty) last chunk
            self._buffer.clear()
        if self._counts[0] == 1:
            assert self._first is not None
            self._emit(*self._first)
            return Imported(self._first[0], self.size)
        level = 0
        # The balanced layout batches each level until a level holds one node: that node is the root.
        while self._counts[level] > 1:
            if self._levels[level]:
                self._reduce(level)
            level += 1
        return Imported(self._levels[level][0].cid, self.size)


def import_stream(
    source: BinaryIO | Iterable[bytes], sink: Sink | None = None, *, max_bytes: int | None = None
) -> Imported:
    """Import a file object (read a chunk at a time) or an iterable of byte strings.

    Raises:
        OverflowError: more than `max_bytes` came; reading stops at the piece that passed the limit.
    """
    importer = Importer(sink)
    pieces = _pieces(source) if hasattr(source, "read") else cast("Iterable[bytes]", source)
    for piece in pieces:
        if max_bytes is not None and importer.size + len(piece) > max_bytes:
            raise OverflowError(f"more than {max_bytes} bytes")
        importer.write(piece)
    return importer.finish()


def _pieces(source: object) -> Iterator[bytes]:
    read = getattr(source, "read")  # noqa: B009 - a file object; typed loosely so any reader fits
    while piece := read(CHUNK_SIZE):
        yield piece


def import_bytes(data: bytes | BinaryIO) -> tuple[CID, list[Block]]:
    """The root CID and every block of `data` (blocks in the order they were made: leaves before their parents)."""
    blocks: list[Block] = []
    source: Iterable[bytes] | BinaryIO = [data] if isinstance(data, bytes | bytearray) else data
    imported = import_stream(source, lambda cid, block: blocks.append(Block(cid, block)))
    return imported.cid, blocks


def verify_block(cid: CID, data: bytes) -> None:
    """Refuse bytes that are not the block `cid` names.

    Raises:
        InvalidBlock: the hash differs, or the CID uses a hash this reader cannot check.
    """
    if cid.hash_code != SHA2_256:
        raise InvalidBlock(f"block {cid} uses multihash 0x{cid.hash_code:x}; only sha2-256 blocks can be verified")
    if hashlib.sha256(data).digest() != cid.digest:
        raise InvalidBlock(f"the block served as {cid} does not hash to that CID; it was refused")


@dataclass(frozen=True, slots=True)
class FileNode:
    """A decoded dag-pb UnixFS file node: its own bytes (if any) and its children in file order."""

    data: bytes
    links: tuple[CID, ...]
    filesize: int | None
    blocksizes: tuple[int, ...] = ()
    """The file bytes under each link, in link order (what lets a reader skip to an offset)."""


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise InvalidBlock("a dag-pb block holds a truncated or overlong varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """`(field number, wire type, value)` of a protobuf message: varints as int, length-delimited as bytes."""
    position = 0
    while position < len(data):
        key, position = _read_varint(data, position)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _read_varint(data, position)
            yield field, wire, value
        elif wire == 2:
            length, position = _read_varint(data, position)
            if position + length > len(data):
                raise InvalidBlock("a dag-pb block holds a field longer than the block")
            yield field, wire, data[position : position + length]
            position += length
        elif wire in (1, 5):
            position += 8 if wire == 1 else 4
        else:
            raise InvalidBlock(f"a dag-pb block holds protobuf wire type {wire}")
    if position != len(data):
        raise InvalidBlock("a dag-pb block ends inside a field")


_TYPE_NAMES = {1: "a directory", 3: "UnixFS metadata", 4: "a symlink", 5: "a sharded directory"}


def decode_file_node(data: bytes) -> FileNode:
    """Decode a dag-pb block that must be a UnixFS File (or Raw) node.

    Raises:
        InvalidBlock: not dag-pb protobuf, no UnixFS Data, or another UnixFS type (a directory, a symlink, …).
    """
    links: list[CID] = []
    unixfs: bytes | None = None
    for field, wire, value in _fields(data):
        if field == 2 and isinstance(value, bytes):
            links.append(_link_cid(value))
        elif field == 1 and isinstance(value, bytes):
            unixfs = value
        else:
            raise InvalidBlock(f"a dag-pb node holds field {field} (wire type {wire}); PBNode has only Data and Links")
    if unixfs is None:
        raise InvalidBlock("a dag-pb node without UnixFS Data is not a file")
    kind = _FILE
    inline = b""
    filesize: int | None = None
    sizes: list[int] = []
    for field, wire, value in _fields(unixfs):
        if field == 1 and isinstance(value, int):
            kind = value
        elif field == 2 and isinstance(value, bytes):
            inline = value
        elif field == 3 and isinstance(value, int):
            filesize = value
        elif field == 4 and isinstance(value, int):
            sizes.append(value)
        elif field == 4 and wire == 2 and isinstance(value, bytes):  # a packed encoding, which some writers use
            position = 0
            while position < len(value):
                size, position = _read_varint(value, position)
                sizes.append(size)
    if kind not in (_FILE, _RAW):
        what = _TYPE_NAMES.get(kind, f"UnixFS type {kind}")
        raise InvalidBlock(f"the CID names {what}, not a file; only files can be read")
    return FileNode(inline, tuple(links), filesize, tuple(sizes))


def _link_cid(link: bytes) -> CID:
    for field, _, value in _fields(link):
        if field == 1 and isinstance(value, bytes):
            try:
                return CID.from_bytes(value)
            except ValueError as exc:
                raise InvalidBlock(f"a dag-pb link holds an invalid CID: {exc}") from None
    raise InvalidBlock("a dag-pb link has no Hash")


def file_size(root: CID, data: bytes) -> int | None:
    """The size a verified root block declares for its file (None when it declares none)."""
    verify_block(root, data)
    if root.codec == RAW:
        return len(data)
    if root.codec != DAG_PB:
        raise InvalidBlock(f"{root} is neither a raw block nor a dag-pb node (codec 0x{root.codec:x})")
    return decode_file_node(data).filesize


def read_file(root: CID, fetch: Fetch, *, max_bytes: int | None = None) -> Iterator[bytes]:
    """The file's bytes in order, a block at a time: each block fetched, checked against its CID, then decoded.

    Raises:
        InvalidBlock: a block does not hash to its CID, is not part of a UnixFS file, or the blocks do not add up to
            the size the root declares.
        OverflowError: the file is larger than `max_bytes` (known from the root before the rest is fetched).
    """
    stack: list[tuple[CID, int]] = [(root, 0)]
    total = 0
    declared: int | None = None
    while stack:
        cid, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise InvalidBlock(f"the DAG under {root} is deeper than {_MAX_DEPTH} levels; refused")
        data = fetch(cid)
        verify_block(cid, data)
        if cid.codec == RAW:
            piece = data
        elif cid.codec == DAG_PB:
            node = decode_file_node(data)
            if depth == 0:
                declared = node.filesize
                if max_bytes is not None and declared is not None and declared > max_bytes:
                    raise OverflowError(f"the file is {declared} bytes, more than {max_bytes}")
            piece = node.data
            stack.extend((child, depth + 1) for child in reversed(node.links))
        else:
            raise InvalidBlock(f"{cid} is neither a raw block nor a dag-pb node (codec 0x{cid.codec:x})")
        total += len(piece)
        if max_bytes is not None and total > max_bytes:
            raise OverflowError(f"the file is more than {max_bytes} bytes")
        if piece:
            yield piece
    if declared is not None and declared != total:
        raise InvalidBlock(f"the blocks under {root} hold {total} bytes but its root declares {declared}")


def read_range(root: CID, fetch: Fetch, start: int, stop: int) -> Iterator[bytes]:
    """The file's bytes `[start, stop)`, fetching only the blocks that hold them: a subtree wholly before the range
    is skipped by its `blocksizes`, and the walk stops at `stop`. Every block fetched is verified, as in
    `read_file`.

    Raises:
        InvalidBlock: as `read_file`.
    """
    yield from _walk(root, fetch, start, stop, 0, 0)


def _walk(cid: CID, fetch: Fetch, start: int, stop: int, offset: int, depth: int) -> Generator[bytes, None, int]:
    """Yield the part of `cid`'s bytes inside `[start, stop)`, the file offset of its first byte being `offset`;
    return the offset after it (after what was read, when the walk stopped early)."""
    if depth > _MAX_DEPTH:
        raise InvalidBlock(f"the DAG is deeper than {_MAX_DEPTH} levels; refused")
    data = fetch(cid)
    verify_block(cid, data)
    if cid.codec == RAW:
        node = FileNode(data, (), len(data))
    elif cid.codec == DAG_PB:
        node = decode_file_node(data)
    else:
        raise InvalidBlock(f"{cid} is neither a raw block nor a dag-pb node (codec 0x{cid.codec:x})")
    low, high = max(start - offset, 0), min(stop - offset, len(node.data))
    if low < high:
        yield node.data[low:high]
    at = offset + len(node.data)
    sized = len(node.blocksizes) == len(node.links)
    for index, child in enumerate(node.links):
        if at >= stop:
            break
        if sized and at + node.blocksizes[index] <= start:
            at += node.blocksizes[index]
            continue
        at = yield from _walk(child, fetch, start, stop, at, depth + 1)
    return at
