"""Pull under its caps (issue 19 point 6), against fake servers that answer from a source node's store: each raw
blob is read under `max_blob_bytes` and a bigger one stops that server; a document bigger than one request's cap
is ingested in pieces (Changes first, the Refs and writers' Changes together last) and reads whole; a server that
serves a newer Ref while withholding its Changes is refused without costing the version already held; and one
server's refusal does not stop the next from being asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from mcp_harness.config import HmServerSettings
from mcp_harness.errors import BadRequest, TooLarge
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.node import Node
from mcp_harness.hypermedia.sync.client import SeedClient
from mcp_harness.hypermedia.sync.pull import Puller
from mcp_harness.store.db import Database
from tests.hypermedia.sync_kit import pair
from tests.hypermedia.test_sync_ingest import OPS, OWNER, STRANGER, TS

SPACE = OWNER.account_id


class FakeServer:
    """A Seed server answering from `source`'s store; `withhold` CIDs 404, `oversize` ones come back padded."""

    def __init__(self, source: Node, base: str, *, withhold: frozenset[str] = frozenset(), pad: int = 0) -> None:
        self.source = source
        self.base = base
        self.withhold = withhold
        self.pad = pad
        self.raw_reads = 0

    def query(self, key: str, params: dict[str, Any]) -> Any:
        ref = self.source.ref(SPACE, "/doc")
        if ref is None:
            return {"type": "not-found"}
        with self.source._db.reading() as conn:  # pyright: ignore[reportPrivateUsage]
            changes = [r[0] for r in conn.execute("SELECT cid FROM hm_changes ORDER BY depth, cid")]
            capabilities = [r[0] for r in conn.execute("SELECT cid FROM hm_capabilities")]
        if key == "ListCapabilities":
            return {"capabilities": [{"id": c} for c in capabilities]}
        if key == "ListChanges":
            return {"changes": [{"id": c} for c in changes]}
        if key == "Resource":
            return {"type": "document", "version": ".".join(ref.heads), "genesis": ref.genesis}
        if key == "ListEvents":
            return {"events": [{"id": f"blob-{ref.cid}"}]}
        return {}

    def raw(self, cid: str) -> bytes | None:
        self.raw_reads += 1
        if cid in self.withhold:
            return None
        data = self.source.store.data(cid)
        return None if data is None else data + b"\0" * self.pad


def _node(tmp_path: Path, name: str, **caps: int) -> Node:
    return Node(Database(tmp_path / f"{name}.db"), **caps)


def _history(count: int, text: str = "x" * 900) -> list[Blob]:
    """The owner's /doc over `count` Changes of ~1 KB each, then a writer's (path-scoped) Change, and its Ref."""
    genesis = blobs.genesis_change(OWNER)
    out: list[Blob] = [genesis]
    head = genesis.cid
    for depth in range(1, count + 1):
        ops = [{"type": "ReplaceBlock", "block": {**OPS[0]["block"], "text": f"{depth} {text}"}}, OPS[1]]
        change = blobs.change(OWNER, genesis=genesis.cid, deps=[head], depth=depth, ops=ops, ts=TS + depth)
        out.append(change)
        head = change.cid
    cap = blobs.capability(OWNER, delegate=STRANGER.account_id, ts=TS, path="/doc")
    edit = [{"type": "ReplaceBlock", "block": {**OPS[0]["block"], "text": "the writer's word"}}]
    last = blobs.change(STRANGER, genesis=genesis.cid, deps=[head], depth=count + 1, ops=edit, ts=TS + 9_000)
    ref = blobs.ref(
        STRANGER, space=SPACE, path="/doc", genesis=genesis.cid, heads=[last.cid], generation=TS, ts=TS + 9_000
    )
    return [*out, cap, last, ref]


def _puller(node: Node, *servers: FakeServer) -> Puller:
    by_url = {s.base: s for s in servers}
    settings = [HmServerSettings(url=s.base) for s in servers]
    return Puller(node, settings, lambda s: by_url[s.url])  # pyright: ignore[reportArgumentType]


def test_a_document_over_one_requests_cap_is_ingested_in_pieces(tmp_path: Path) -> None:
    source = _node(tmp_path, "source")
    source.publish(_history(30))  # ~30 KB of Changes, a path-scoped writer's head
    node = _node(tmp_path, "node", max_blob_bytes=4096, max_request_bytes=8192)
    sizes: list[int] = []
    ingest = node.ingest

    def spy(items: Any, **kw: Any) -> list[str]:
        sizes.append(sum(len(d) for d, _ in items))
        return ingest(items, **kw)

    node.ingest = spy  # type: ignore[method-assign]
    report = _puller(node, FakeServer(source, "https://one.example")).pull(SPACE, "/doc", comments=False)
    assert report.server == "https://one.example" and report.stored == 34
    assert len(sizes) > 3 and max(sizes) <= 8192  # pieces, none over the cap
    assert node.document(SPACE, "/doc").state.tree[0].block.text == "the writer's word"


def test_a_blob_over_the_blob_cap_stops_that_server_and_the_next_is_asked(tmp_path: Path) -> None:
    source = _node(tmp_path, "source")
    source.publish(_history(2))
    node = _node(tmp_path, "node", max_blob_bytes=4096)
    fat = FakeServer(source, "https://fat.example", pad=5000)
    honest = FakeServer(source, "https://honest.example")
    report = _puller(node, fat, honest).pull(SPACE, "/doc", comments=False)
    assert report.server == "https://honest.example" and fat.raw_reads == 1  # stopped at the first fat blob
    assert "fat.example" in report.errors[0] and "max_blob_bytes" in report.errors[0]
    with pytest.raises(TooLarge) as raised:
        _puller(_node(tmp_path, "alone", max_blob_bytes=4096), fat).pull(SPACE, "/doc", comments=False)
    assert "max_blob_bytes" in raised.value.message and "fat.example" in raised.value.message


def test_a_newer_ref_without_its_changes_is_refused_and_the_held_version_still_reads(tmp_path: Path) -> None:
    history = _history(2)
    *older, cap, last, ref = history
    source = _node(tmp_path, "source")
    source.publish(history)
    node = _node(tmp_path, "node")
    node.ingest([(b.data, str(b.cid)) for b in older])
    owner_ref = blobs.ref(
        OWNER, space=SPACE, path="/doc", genesis=older[0].cid, heads=[older[-1].cid], generation=TS, ts=TS + 5
    )
    node.ingest([(owner_ref.data, None)])
    before = node.document(SPACE, "/doc").state.tree[0].block.text
    hostile = FakeServer(source, "https://hostile.example", withhold=frozenset({str(last.cid)}))
    with pytest.raises(BadRequest) as raised:
        _puller(node, hostile).pull(SPACE, "/doc", comments=False)
    assert str(last.cid) in raised.value.message and "neither in this batch nor held" in raised.value.message
    assert node.store.data(str(ref.cid)) is None and node.document(SPACE, "/doc").state.tree[0].block.text == before
    report = _puller(node, hostile, FakeServer(source, "https://honest.example")).pull(SPACE, "/doc", comments=False)
    assert report.server == "https://honest.example" and node.store.data(str(cap.cid)) is not None
    assert node.document(SPACE, "/doc").state.tree[0].block.text == "the writer's word"


@pytest.mark.anyio
async def test_the_http_client_reads_a_raw_blob_under_the_blob_cap(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        home = p.b.hypermedia.ref(p.bob.account_id, "")
        assert home is not None
        head = home.heads[0]
        size = len(p.b.hypermedia.store.data(head) or b"")
        client = SeedClient(p.a.web, p.base, max_bytes=1 << 20, max_blob_bytes=size - 1)
        with pytest.raises(TooLarge):
            await anyio.to_thread.run_sync(client.raw, head)
        roomy = SeedClient(p.a.web, p.base, max_bytes=1 << 20, max_blob_bytes=size)
        assert await anyio.to_thread.run_sync(roomy.raw, head) == p.b.hypermedia.store.data(head)
