"""What a hostile caller can make the Seed web API spend, and the numbers it takes: a PublishBlobs envelope is
decoded under a budget sized for its shape and an item cap (a body of millions of empty maps is refused after a few
thousand), a signed blob inside it under one sized by its bytes, and a count parameter that is not a finite whole
number (`limit=1e400`, JSON's infinity) is a 400 naming it, never a 500."""

from __future__ import annotations

import httpx2
import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import blobs, cbor
from mcp_harness.hypermedia.web_api import MAX_PUBLISH_BLOBS, parse_publish_blobs, publish_blobs_body
from mcp_harness.identity.keys import KeyPair
from tests.server import test_seed_api
from tests.server.test_seed_api import Site

pytestmark = pytest.mark.anyio
site = test_seed_api.site  # the fixture: a served harness with a document and comments
CBOR = {"Content-Type": "application/cbor"}


def _empty_maps(count: int) -> bytes:
    """`{blobs: [{}, {}, …]}`: a map, its key, an array head of `count`, then one byte (0xa0) per empty map."""
    return b"\xa1\x65blobs\x9a" + count.to_bytes(4, "big") + b"\xa0" * count


def test_an_envelope_of_empty_maps_runs_out_of_budget_at_once() -> None:
    with pytest.raises(BadRequest) as raised:
        parse_publish_blobs(_empty_maps(4_000_000))  # 4 MB: once 306 MB of Python dicts and 8.7 s
    message = raised.value.message
    assert f"at most {MAX_PUBLISH_BLOBS} blobs" in message and "decode budget" in message


def test_an_envelope_over_the_item_cap_is_refused_naming_the_cap() -> None:
    genesis = blobs.genesis_change(KeyPair.from_seed(bytes(32)))
    body = cbor.encode({"blobs": [{"data": genesis.data}] * (MAX_PUBLISH_BLOBS + 1)})
    with pytest.raises(BadRequest) as raised:
        parse_publish_blobs(body)
    assert str(MAX_PUBLISH_BLOBS) in raised.value.message
    assert parse_publish_blobs(cbor.encode({"blobs": [{"data": genesis.data}] * 3})) == [(genesis.data, None)] * 3


def test_the_decode_budget_stops_containers_not_real_blobs() -> None:
    assert cbor.decode(b"\x80", budget=cbor.CONTAINER_COST) == []
    with pytest.raises(ValueError, match="decode budget"):
        cbor.decode(b"\x82\x80\x80", budget=2 * cbor.CONTAINER_COST)  # three arrays
    genesis = blobs.genesis_change(KeyPair.from_seed(bytes(32))).cid
    real = blobs.change(
        KeyPair.from_seed(bytes(32)),
        genesis=genesis,
        deps=[genesis],
        depth=1,
        ops=[
            {"type": "ReplaceBlock", "block": {"id": f"b{i}", "type": "Paragraph", "text": "", "annotations": []}}
            for i in range(2000)
        ],
        ts=1,
    )
    assert cbor.decode(real.data, budget=cbor.budget_for(len(real.data))) == cbor.decode(real.data)


async def test_publish_blobs_refuses_a_bomb_and_a_blob_over_its_budget(site: Site) -> None:
    # A blob that is mostly empty arrays: valid DAG-CBOR, refused by its decode budget before anything else.
    heavy = cbor.encode({"type": "Profile", "name": "x", "ts": 1, "junk": [[]] * 6000})
    async with httpx2.AsyncClient(base_url=site.base) as http:
        bomb = await http.post("/api/PublishBlobs", content=_empty_maps(1_000_000), headers=CBOR)
        assert bomb.status_code == 400 and "decode budget" in bomb.json()["error"]
        body = publish_blobs_body([(None, heavy)])
        got = await http.post("/api/PublishBlobs", content=body, headers=CBOR)
        assert got.status_code == 400 and "#1 (sent without a CID)" in got.json()["error"]
        assert "decode budget" in got.json()["error"]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("/api/Query?includes={includes}&limit=1e400", "Query limit"),
        ("/api/Query?includes={includes}&limit=2.5", "Query limit"),
        ("/api/Query?includes={includes}&limit=-1", "Query limit"),
        ("/api/ListEvents?pageSize=1e400", "ListEvents pageSize"),
        ("/api/ListEvents?pageSize=-5", "ListEvents pageSize"),
        ("/api/ListEvents?pageSize=abc", "ListEvents pageSize"),
    ],
)
async def test_a_count_that_is_not_a_finite_whole_number_is_a_400_naming_it(site: Site, query: str, named: str) -> None:
    includes = f"%5B%7B%22space%22%3A%22{site.alice.account_id}%22%2C%22mode%22%3A%22Children%22%7D%5D"
    async with httpx2.AsyncClient(base_url=site.base) as http:
        got = await http.get(query.format(includes=includes))
        assert got.status_code == 400 and named in got.json()["error"] and "whole number" in got.json()["error"]
        fine = await http.get(f"/api/Query?includes={includes}&limit=1")
        assert fine.status_code == 200
