"""The UnixFS importer against the official one (`ipfs-unixfs-importer` 15.4, tests/js/unixfs_oracle.mjs), and the
reader that walks a DAG back, verifying every block.

One Node process imports every size, generating the same bytes from the same seeds (tests/hypermedia/unixfs_kit.py):
the empty file, one byte, a chunk minus one, one chunk, one chunk plus one (the first tree), 174 chunks (one full
node) and 174 chunks plus one (the first second level), and a few MiB.
"""

from __future__ import annotations

import io
import random

import pytest

from mcp_harness.hypermedia.cid import CID, DAG_PB, RAW, cid_of
from mcp_harness.hypermedia.unixfs import (
    CHUNK_SIZE,
    MAX_LINKS,
    Importer,
    InvalidBlock,
    decode_file_node,
    encode_file_node,
    import_bytes,
    import_stream,
    read_file,
    read_range,
)
from tests.hypermedia.unixfs_kit import K, file_bytes
from tests.js_oracle import run_js

SIZES = (0, 1, K - 1, K, K + 1, 174 * K, 174 * K + 1, 3 * 1024 * 1024 + 7)


@pytest.fixture(scope="module")
def oracle() -> dict[int, dict[str, object]]:
    cases = [{"size": size, "seed": f"s{size}"} for size in SIZES]
    answers = run_js("unixfs_oracle.mjs", {"op": "cids", "cases": cases}, package="ipfs-unixfs-importer")
    return dict(zip(SIZES, answers, strict=True))


@pytest.mark.parametrize("size", SIZES)
def test_the_cid_and_the_blocks_equal_the_js_importers(size: int, oracle: dict[int, dict[str, object]]) -> None:
    data = file_bytes(size, f"s{size}")
    cid, blocks = import_bytes(data)
    assert str(cid) == oracle[size]["cid"]
    assert len({b.cid for b in blocks}) == oracle[size]["blocks"]
    # One chunk or less is its own raw block; more is a dag-pb root.
    assert cid.codec == (RAW if size <= K else DAG_PB) and cid.version == 1
    assert b"".join(read_file(cid, {b.cid: b.data for b in blocks}.__getitem__)) == data


def test_the_empty_file_is_the_raw_block_of_no_bytes() -> None:
    cid, blocks = import_bytes(b"")
    assert cid == cid_of(b"", RAW) and str(cid) == "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    assert [b.data for b in blocks] == [b""]


def test_how_the_bytes_arrive_does_not_change_the_dag(oracle: dict[int, dict[str, object]]) -> None:
    size = 3 * 1024 * 1024 + 7
    data = file_bytes(size, f"s{size}")
    expected = oracle[size]["cid"]
    pieces = [data[i : i + 7777] for i in range(0, size, 7777)]
    assert str(import_stream(pieces).cid) == expected
    assert str(import_stream(io.BytesIO(data)).cid) == expected  # a file object, read a chunk at a time
    importer = Importer()
    importer.write(memoryview(data)[:5])
    importer.write(bytearray(data[5:]))
    done = importer.finish()
    assert str(done.cid) == expected and done.size == size


def test_a_dry_import_hands_out_no_blocks_and_a_sink_gets_each_once_children_first() -> None:
    data = file_bytes(2 * K + 3, "order")
    seen: list[CID] = []
    imported = import_stream([data], lambda cid, block: seen.append(cid))
    assert seen[-1] == imported.cid and len(seen) == 4 and all(c.codec == RAW for c in seen[:3])
    assert import_stream([data]).cid == imported.cid


def test_a_node_encodes_links_first_and_decodes_back() -> None:
    leaves = [cid_of(bytes([i]) * 10, RAW) for i in range(3)]
    block = encode_file_node((leaf, 10, 10) for leaf in leaves)
    assert block[0] == 0x12  # PBNode field 2 (Links) before field 1 (Data), as @ipld/dag-pb writes it
    node = decode_file_node(block)
    assert node.links == tuple(leaves) and node.filesize == 30 and node.blocksizes == (10, 10, 10)
    assert node.data == b""


def test_over_the_limit_stops_reading() -> None:
    with pytest.raises(OverflowError):
        import_stream([b"x" * 1000, b"y" * 1000], max_bytes=1500)
    assert import_stream([b"x" * 1500], max_bytes=1500).size == 1500


def _dag(size: int, seed: str) -> tuple[bytes, CID, dict[CID, bytes]]:
    data = file_bytes(size, seed)
    cid, blocks = import_bytes(data)
    return data, cid, {b.cid: b.data for b in blocks}


def test_ranges_read_only_the_blocks_they_touch() -> None:
    data, cid, store = _dag(MAX_LINKS * K + 3 * K + 11, "range")
    rnd = random.Random(7)
    for start, stop in [(0, 0), (0, 1), (K - 1, K + 1), (len(data) - 5, len(data)), (0, len(data))] + [
        tuple(sorted((rnd.randrange(len(data) + 1), rnd.randrange(len(data) + 1)))) for _ in range(15)
    ]:
        fetched: list[CID] = []

        def fetch(c: CID, fetched: list[CID] = fetched) -> bytes:
            fetched.append(c)
            return store[c]

        assert b"".join(read_range(cid, fetch, start, stop)) == data[start:stop]
        leaves = sum(1 for c in fetched if c.codec == RAW)
        assert leaves <= (stop - start) // CHUNK_SIZE + 2


def test_a_tampered_block_is_refused_not_returned() -> None:
    _, cid, store = _dag(3 * K, "tamper")
    leaf = next(c for c in store if c.codec == RAW)
    store[leaf] = b"evil" + store[leaf][4:]
    got: list[bytes] = []
    with pytest.raises(InvalidBlock, match="does not hash"):
        got.extend(read_file(cid, store.__getitem__))
    assert all(b"evil" not in piece for piece in got)


def test_a_root_that_lies_about_its_size_and_a_directory_are_refused() -> None:
    leaf = cid_of(b"abc", RAW)
    lying = encode_file_node([(leaf, 3, 5)])  # claims 5 bytes under a 3-byte leaf
    root = cid_of(lying, DAG_PB)
    store = {leaf: b"abc", root: lying}
    with pytest.raises(InvalidBlock, match="declares 5"):
        b"".join(read_file(root, store.__getitem__))
    directory = b"\x0a\x02\x08\x01"  # PBNode{Data: UnixFS{Type: Directory}}
    with pytest.raises(InvalidBlock, match="directory"):
        b"".join(read_file(cid_of(directory, DAG_PB), {cid_of(directory, DAG_PB): directory}.__getitem__))


def test_a_file_over_the_reader_limit_is_refused_from_its_root() -> None:
    _, cid, store = _dag(3 * K, "big")
    fetched: list[CID] = []

    def fetch(c: CID) -> bytes:
        fetched.append(c)
        return store[c]

    with pytest.raises(OverflowError):
        b"".join(read_file(cid, fetch, max_bytes=K))
    assert fetched == [cid]  # the root's filesize said so: no leaf was fetched
