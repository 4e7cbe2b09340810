"""`write ipfs://` and `read ipfs://` through the SDK client: publishing content, memory files and attachments as
UnixFS (the CIDs the JS importer computes: tests/hypermedia/test_unixfs.py), dry runs, the publish grant, and reads
from the block store or from a real gateway on loopback that may lie (tests/spaces/ipfs_kit.py)."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia.cid import RAW
from mcp_harness.hypermedia.unixfs import import_bytes
from mcp_harness.server import build_server
from mcp_harness.spaces.hm.write import PUBLISH_REFUSAL
from mcp_harness.spaces.registry import uses_network
from mcp_harness.store.ipfs_blocks import IpfsBlockStore
from tests.conftest import call, refused
from tests.hypermedia.unixfs_kit import K, file_bytes
from tests.spaces.conftest import grant
from tests.spaces.ipfs_kit import Gateway, gateway_server, harness_with_gateways

pytestmark = pytest.mark.anyio


def _block_rows(harness: Harness) -> int:
    with harness.db.reading() as conn:
        return conn.execute("SELECT count(*) FROM ipfs_blocks").fetchone()[0]


async def test_content_publishes_and_reads_back_from_the_block_store(client: Client, harness: Harness) -> None:
    made = await call(client, "write", {"address": "ipfs://", "content": "hello, ipfs"})
    cid, _ = import_bytes(b"hello, ipfs")
    assert made == {
        "summary": made["summary"],
        "url": f"ipfs://{cid}",
        "cid": str(cid),
        "size": 11,
        "dryRun": False,
    }
    assert "public" in made["summary"] and IpfsBlockStore(harness.db).get(cid) == b"hello, ipfs"
    assert any((harness.settings.data_dir / "ipfs").rglob(str(cid)))  # a file under the data dir, indexed in SQLite
    assert uses_network("write", {"address": "ipfs://", "content": "x"})  # logged first: never holds the database
    read = await call(client, "read", {"address": made["url"]})
    assert read["path"] == f"ipfs/{cid}" and read["source"] == "local" and read["size"] == 11
    assert harness.memory(harness.agent()).read_file(f"ipfs/{cid}").data == b"hello, ipfs"
    # A bare CID, `/ipfs/<cid>` and `ipfs:<cid>` name the same file; options.path picks where it lands.
    for form in (str(cid), f"/ipfs/{cid}", f"ipfs:{cid}"):
        again = await call(client, "read", {"address": form, "options": {"path": "~/memory/got/hello.txt"}})
        assert again["path"] == "got/hello.txt" and again["cid"] == str(cid)
    resource = await client.read_resource(f"ipfs://{cid}")
    assert resource.contents[0].text == "hello, ipfs"  # pyright: ignore[reportAttributeAccessIssue]


async def test_a_memory_file_of_several_chunks_publishes_as_its_unixfs_dag(client: Client, harness: Harness) -> None:
    data = file_bytes(2 * K + 5, "memory")
    harness.memory(harness.agent()).write_file("pics/big.bin", data)
    made = await call(client, "write", {"address": "ipfs://", "options": {"fromPath": "~/memory/pics/big.bin"}})
    cid, blocks = import_bytes(data)
    assert made["cid"] == str(cid) and made["size"] == len(data) and cid.codec != RAW
    store = IpfsBlockStore(harness.db)
    assert all(store.get(b.cid) == b.data for b in blocks) and _block_rows(harness) == len(blocks)
    resource = (await client.read_resource(f"ipfs://{cid}")).contents[0]
    assert base64.b64decode(resource.blob) == data  # pyright: ignore[reportAttributeAccessIssue]
    # The same bytes again are the same blocks: nothing new is stored.
    await call(client, "write", {"address": "ipfs://", "options": {"fromPath": "pics/big.bin"}})
    assert _block_rows(harness) == len(blocks)


async def test_dry_run_computes_the_cid_and_stores_nothing(client: Client, harness: Harness) -> None:
    made = await call(client, "write", {"address": "ipfs://", "content": "draft", "dryRun": True})
    assert made["cid"] == str(import_bytes(b"draft")[0]) and made["dryRun"] is True
    assert made["summary"].startswith("Dry run:") and _block_rows(harness) == 0
    assert not (harness.settings.data_dir / "ipfs").exists()


async def test_without_the_publish_grant_nothing_is_published(client: Client, harness: Harness) -> None:
    grant(harness, tools=["execute"])
    error = await refused(client, "write", {"address": "ipfs://", "content": "secret"})
    assert error == {"code": "forbidden", "status": 403, "message": PUBLISH_REFUSAL}
    assert _block_rows(harness) == 0


async def test_every_refusal_names_the_problem(client: Client, harness: Harness) -> None:
    cases = [
        ({"address": "ipfs://"}, 400, "nothing to publish"),
        ({"address": "ipfs://", "content": "a", "options": {"fromPath": "a"}}, 400, "content and fromPath"),
        ({"address": "ipfs://", "options": {"fromUrl": "https://x"}}, 400, 'option "fromUrl"'),
        ({"address": "ipfs://", "content": 5}, 400, "not of type 'string'"),
        (
            {"address": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "content": "a"},
            400,
            "the CID comes from the bytes",
        ),
        ({"address": "ipfs://", "options": {"fromPath": "nope.bin"}}, 404, "nope.bin"),
        ({"address": "ipfs://", "options": {"fromAttachment": "xyz"}}, 400, "64 lowercase hex"),
    ]
    for arguments, status, words in cases:
        error = await refused(client, "write", arguments)
        assert error["status"] == status and words in error["message"], (arguments, error)
    reads = [
        ({"address": "ipfs://"}, 400, "needs a CID"),
        ({"address": "ipfs://nope"}, 400, "not a CID"),
        ({"address": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku/a.txt"}, 400, "path inside"),
        (
            {"address": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "options": {"to": "x"}},
            400,
            'option "to"',
        ),
    ]
    for arguments, status, words in reads:
        error = await refused(client, "read", arguments)
        assert error["status"] == status and words in error["message"], (arguments, error)


async def test_an_attachment_publishes_by_its_id(harness: Harness) -> None:
    session = harness.sessions.create(harness.account_id, harness.agent().id).id
    photo = file_bytes(K + 1, "photo")
    ident = harness.attachments.add(session, "photo.jpg", "image/jpeg", io.BytesIO(photo)).id
    async with Client(build_server(harness, session_id=session)) as c:
        made = await call(c, "write", {"address": "ipfs://", "options": {"fromAttachment": f"attachment:{ident}"}})
        assert made["cid"] == str(import_bytes(photo)[0]) and made["size"] == len(photo)
        other = harness.sessions.create(harness.account_id, harness.agent().id).id
    async with Client(build_server(harness, session_id=other)) as c:
        error = await refused(c, "write", {"address": "ipfs://", "options": {"fromAttachment": ident}})
        assert error["status"] == 404  # another conversation's attachment is not found from here


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    with gateway_server(Gateway()) as served:
        yield served


async def test_a_missing_file_comes_from_the_gateway_verified_and_then_is_local(
    gateway: Gateway, tmp_path: Path
) -> None:
    data = file_bytes(3 * K + 9, "remote")
    cid = gateway.add(data)
    harness = harness_with_gateways(tmp_path / "data", gateway.url)
    try:
        async with Client(build_server(harness)) as c:
            got = await call(c, "read", {"address": f"ipfs://{cid}", "options": {"path": "remote.bin"}})
            assert got["source"] == gateway.url and got["size"] == len(data)
            assert harness.memory(harness.agent()).read_file("remote.bin").data == data
            assert all("format=raw" in r for r in gateway.requests) and len(gateway.requests) == 5
            gateway.requests.clear()
            again = await call(c, "read", {"address": f"ipfs://{cid}"})
            assert again["source"] == "local" and gateway.requests == []
    finally:
        harness.close()


async def test_a_tampered_block_from_the_gateway_is_refused_and_nothing_is_saved(
    gateway: Gateway, tmp_path: Path
) -> None:
    data = file_bytes(3 * K, "tampered")
    cid = gateway.add(data)
    _, blocks = import_bytes(data)
    leaf = blocks[1].cid
    gateway.tampered[leaf] = b"not what the CID says" + gateway.blocks[leaf][21:]
    harness = harness_with_gateways(tmp_path / "data", gateway.url)
    try:
        async with Client(build_server(harness)) as c:
            error = await refused(c, "read", {"address": f"ipfs://{cid}", "options": {"path": "t.bin"}})
        assert error["status"] == 502 and str(leaf) in error["message"] and "refused" in error["message"]
        store = IpfsBlockStore(harness.db)
        assert not store.has(leaf) and not store.has(cid)
        with pytest.raises(Exception, match="not found"):
            harness.memory(harness.agent()).read_file("t.bin")
    finally:
        harness.close()


async def test_a_seed_node_sends_the_whole_file_which_must_import_to_the_cid(gateway: Gateway, tmp_path: Path) -> None:
    gateway.whole_files = True
    data = file_bytes(2 * K + 1, "seed")
    cid = gateway.add(data)
    lie = gateway.add(b"a different file")
    gateway.tampered[lie] = b"not the different file"
    harness = harness_with_gateways(tmp_path / "data")  # none configured: a gateway URL's own host is asked
    try:
        async with Client(build_server(harness)) as c:
            got = await call(c, "read", {"address": f"{gateway.url}/ipfs/{cid}?filename=x.bin"})
            assert got["size"] == len(data) and harness.memory(harness.agent()).read_file(got["path"]).data == data
            error = await refused(c, "read", {"address": f"{gateway.url}/ipfs/{lie}"})
            assert error["status"] == 502 and "refused" in error["message"]
    finally:
        harness.close()


async def test_a_file_no_gateway_has_is_not_found(gateway: Gateway, tmp_path: Path) -> None:
    cid, _ = import_bytes(b"nobody has this")
    harness = harness_with_gateways(tmp_path / "data", gateway.url)
    try:
        async with Client(build_server(harness)) as c:
            error = await refused(c, "read", {"address": str(cid)})
        assert error["status"] == 404 and gateway.url in error["message"]
    finally:
        harness.close()
    alone = harness_with_gateways(tmp_path / "alone")
    try:
        async with Client(build_server(alone)) as c:
            error = await refused(c, "read", {"address": str(cid)})
        assert error["status"] == 404 and "[ipfs] gateways" in error["message"]
    finally:
        alone.close()


async def test_files_over_the_configured_cap_are_refused_both_ways(gateway: Gateway, tmp_path: Path) -> None:
    cid = gateway.add(file_bytes(K + 1, "large"))
    harness = Harness(
        load_settings(
            data_dir=tmp_path / "data",
            web={"allow_hosts": ["127.0.0.1"]},
            ipfs={"gateways": [gateway.url], "max_file_bytes": 4096},
        )
    )
    try:
        async with Client(build_server(harness)) as c:
            error = await refused(c, "write", {"address": "ipfs://", "content": "x" * 5000})
            assert error["status"] == 413 and "[ipfs] max_file_bytes" in error["message"]
            error = await refused(c, "read", {"address": f"ipfs://{cid}"})
            assert error["status"] == 413 and "[ipfs] max_file_bytes" in error["message"]
        assert _block_rows(harness) == 0 and len(gateway.requests) == 1  # the root's size said so
    finally:
        harness.close()
