"""`GET /ipfs/<cid>` on a real uvicorn server, checked with a raw HTTP client: the file reassembled from the block
store, `ETag` = the CID, one `Range` at a time (206, `Content-Range`; 416 past the end), `?filename=`, raw blocks for
a trustless reader — which is how a second harness fetches from this one — and the same guard as `/mcp`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client

from mcp_harness.config import HttpSettings, load_settings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia.cid import CID
from mcp_harness.server import build_server, http_app
from mcp_harness.store.ipfs_blocks import IpfsBlockStore, ipfs_upload
from tests.conftest import call, owner_and_other, serving
from tests.hypermedia.unixfs_kit import K, file_bytes
from tests.spaces.ipfs_kit import harness_with_gateways

pytestmark = pytest.mark.anyio

DATA = file_bytes(2 * K + 1000, "served")


@pytest.fixture
async def served(harness: Harness) -> AsyncIterator[tuple[str, CID]]:
    cid = ipfs_upload(IpfsBlockStore(harness.db), DATA).cid
    app = http_app(build_server(harness), host="127.0.0.1", http=HttpSettings(), ipfs=harness)
    async with serving(app) as base:
        yield base, cid


async def test_the_whole_file_with_its_etag_and_a_filename(served: tuple[str, CID]) -> None:
    base, cid = served
    async with httpx2.AsyncClient(base_url=base) as http:
        got = await http.get(f"/ipfs/{cid}", params={"filename": 'my "photo".bin'})
        assert got.status_code == 200 and got.content == DATA
        assert got.headers["etag"] == f'"{cid}"' and got.headers["content-length"] == str(len(DATA))
        assert got.headers["content-type"] == "application/octet-stream"
        assert got.headers["accept-ranges"] == "bytes" and got.headers["x-content-type-options"] == "nosniff"
        disposition = got.headers["content-disposition"]
        assert (
            disposition.startswith('attachment; filename="my _photo_.bin"')
            and "filename*=UTF-8''my%20%22" in disposition
        )
        again = await http.get(f"/ipfs/{cid}", headers={"If-None-Match": f'"{cid}"'})
        assert again.status_code == 304 and again.content == b""
        head = await http.head(f"/ipfs/{cid}")
        assert head.status_code == 200 and head.headers["content-length"] == str(len(DATA)) and head.content == b""


async def test_single_ranges_and_the_unsatisfiable_one(served: tuple[str, CID]) -> None:
    base, cid = served
    size = len(DATA)
    async with httpx2.AsyncClient(base_url=base) as http:
        for header, start, stop in [
            ("bytes=0-0", 0, 1),
            (f"bytes={K - 5}-{K + 4}", K - 5, K + 5),  # across two leaves
            ("bytes=-100", size - 100, size),
            (f"bytes={2 * K}-", 2 * K, size),
            (f"bytes=10-{size + 50}", 10, size),  # an end past the file is cut to it
        ]:
            got = await http.get(f"/ipfs/{cid}", headers={"Range": header})
            assert got.status_code == 206, header
            assert (
                got.content == DATA[start:stop] and got.headers["content-range"] == f"bytes {start}-{stop - 1}/{size}"
            )
            assert got.headers["content-length"] == str(stop - start)
        past = await http.get(f"/ipfs/{cid}", headers={"Range": f"bytes={size}-"})
        assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{size}"
        several = await http.get(f"/ipfs/{cid}", headers={"Range": "bytes=0-1,5-6"})
        assert several.status_code == 200 and several.content == DATA  # several ranges: the whole file, as allowed


async def test_raw_blocks_missing_files_and_bad_requests(served: tuple[str, CID], harness: Harness) -> None:
    base, cid = served
    async with httpx2.AsyncClient(base_url=base) as http:
        block = await http.get(f"/ipfs/{cid}", params={"format": "raw"})
        assert block.status_code == 200 and block.headers["content-type"] == "application/vnd.ipld.raw"
        assert block.content == IpfsBlockStore(harness.db).get(cid)
        same = await http.get(f"/ipfs/{cid}", headers={"Accept": "application/vnd.ipld.raw"})
        assert same.content == block.content
        missing = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
        assert (await http.get(f"/ipfs/{missing}")).status_code == 404
        bad = await http.get("/ipfs/not-a-cid")
        assert bad.status_code == 400 and "not a CID" in bad.json()["error"]
        posted = await http.post(f"/ipfs/{cid}", content=b"x")
        assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
        wrong_host = await http.get(f"/ipfs/{cid}", headers={"Host": "attacker.example"})
        assert wrong_host.status_code == 421


async def test_a_missing_leaf_is_a_404_before_any_byte(harness: Harness, served: tuple[str, CID]) -> None:
    base, cid = served
    leaf = next(b for b in _children(harness, cid))
    with harness.db.transaction() as conn:
        conn.execute("DELETE FROM ipfs_blocks WHERE cid = ?", (str(leaf),))
    async with httpx2.AsyncClient(base_url=base) as http:
        assert (await http.get(f"/ipfs/{cid}")).status_code == 404


def _children(harness: Harness, cid: CID) -> list[CID]:
    from mcp_harness.hypermedia.unixfs import decode_file_node

    root = IpfsBlockStore(harness.db).get(cid)
    assert root is not None
    return list(decode_file_node(root).links)


async def test_with_tokens_the_bearer_token_is_required(harness: Harness) -> None:
    cid = ipfs_upload(IpfsBlockStore(harness.db), b"token guarded").cid
    app = http_app(build_server(harness), host="127.0.0.1", http=owner_and_other(harness), ipfs=harness)
    async with serving(app) as base, httpx2.AsyncClient(base_url=base) as http:
        assert (await http.get(f"/ipfs/{cid}")).status_code == 401
        ok = await http.get(f"/ipfs/{cid}", headers={"Authorization": "Bearer other-token"})
        assert ok.status_code == 200 and ok.content == b"token guarded"


async def test_another_harness_reads_from_this_server_as_its_gateway(served: tuple[str, CID], tmp_path: Path) -> None:
    base, cid = served
    reader = harness_with_gateways(tmp_path / "reader", base)
    try:
        async with Client(build_server(reader)) as c:
            got = await call(c, "read", {"address": f"ipfs://{cid}", "options": {"path": "copy.bin"}})
        assert got["source"] == base and reader.memory(reader.agent()).read_file("copy.bin").data == DATA
        assert IpfsBlockStore(reader.db).has(cid)
    finally:
        reader.close()
    assert load_settings(data_dir=tmp_path / "reader").ipfs.gateways == ["https://ipfs.io"]  # the default
