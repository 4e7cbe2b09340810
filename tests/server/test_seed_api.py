"""The Seed web API on a real uvicorn server (`server/seed_api.py`), asked the way the official client asks
(`web_api.encode_query`): the node's documents, comments, profile, changes, events and directories; raw blobs at
`/ipfs/<cid>`; PublishBlobs verifying every blob before storing it, all or none; `{"error"}` refusals; and the guard,
with `[hypermedia] public` opening the reads only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from mcp import Client

from mcp_harness.config import HttpSettings, HypermediaSettings, TokenSettings, load_settings, token_hash
from mcp_harness.harness import Harness
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.cbor import encode
from mcp_harness.hypermedia.web_api import encode_query, publish_blobs_body, superjson_value
from mcp_harness.identity.identities import Identity, create_identity
from mcp_harness.identity.keys import KeyPair
from mcp_harness.server import build_server, http_app
from tests.conftest import call, serving
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio


@dataclass
class Site:
    base: str
    harness: Harness
    alice: Identity
    doc: str
    comment: str
    reply: str


@pytest.fixture
async def site(harness: Harness) -> AsyncIterator[Site]:
    alice = create_identity(harness, "Alice")
    grant(harness, alice)
    doc = f"hm://{alice.account_id}/notes"
    async with Client(build_server(harness)) as client:
        await call(client, "write", {"address": doc, "content": "---\nname: Notes\n---\n\n# Birds\n\nHerons."})
        first = await call(client, "write", {"address": doc, "content": "Lovely.", "options": {"action": "comment"}})
        reply = await call(
            client,
            "write",
            {"address": doc, "content": "Agreed.", "options": {"action": "comment", "replyTo": first["id"]}},
        )
    app = http_app(build_server(harness), host="127.0.0.1", http=HttpSettings(), ipfs=harness)
    async with serving(app) as base:
        yield Site(base, harness, alice, doc, first["id"], reply["id"])


async def _query(http: httpx2.AsyncClient, key: str, params: dict[str, Any]) -> Any:
    got = await http.get(f"/api/{key}{encode_query(key, params)}", headers={"Accept": "application/json"})
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("application/json")
    return superjson_value(got.content)


def _target(uid: str, path: list[str]) -> dict[str, Any]:
    return {"id": f"hm://{uid}" + "".join(f"/{p}" for p in path), "uid": uid, "path": path, "version": None}


async def test_documents_accounts_and_changes_read_as_the_client_expects(site: Site) -> None:
    uid = site.alice.account_id
    async with httpx2.AsyncClient(base_url=site.base) as http:
        resource = await _query(http, "Resource", {"id": site.doc})
        assert resource["type"] == "document" and resource["id"]["uid"] == uid and resource["id"]["path"] == ["notes"]
        document = resource["document"]
        assert document["metadata"] == {"name": "Notes"} and document["content"][0]["block"]["text"] == "Birds"
        assert document["generationInfo"]["genesis"] == document["genesis"]
        meta = await _query(http, "ResourceMetadata", {"id": site.doc})
        assert meta == {"id": resource["id"] | {"version": None, "blockRef": None}, "metadata": {"name": "Notes"}}
        missing = await _query(http, "Resource", {"id": f"hm://{uid}/nothing"})
        assert missing["type"] == "not-found"
        account = await _query(http, "Account", {"id": uid})
        assert account["type"] == "account" and account["metadata"]["name"] == "Alice"
        stranger = KeyPair.generate().account_id
        assert await _query(http, "Account", {"id": stranger}) == {"type": "account-not-found", "uid": stranger}
        changes = await _query(http, "ListChanges", {"targetId": site.doc})
        assert changes["latestVersion"] == document["version"]
        ids = {c["id"] for c in changes["changes"]}
        assert set(document["version"].split(".")) <= ids and all(c["author"] == uid for c in changes["changes"])
        assert any(c["deps"] == [] for c in changes["changes"])  # the genesis is in the history
        change = document["version"].split(".")[0]
        got = await _query(http, "GetCID", {"cid": change})
        assert got["value"]["type"] == "Change" and got["value"]["genesis"] == {"/": document["genesis"]}
        raw = await http.get(f"/ipfs/{change}")
        assert raw.status_code == 200 and raw.headers["content-type"] == "application/vnd.ipld.raw"
        assert blobs.verify_blob(raw.content).cid.__str__() == change
        assert site.harness.hypermedia.store.data(change) == raw.content


async def test_comments_events_directories_and_config(site: Site) -> None:
    uid = site.alice.account_id
    async with httpx2.AsyncClient(base_url=site.base) as http:
        listed = await _query(http, "ListComments", {"targetId": _target(uid, ["notes"])})
        comments = listed["comments"]
        assert [f"hm://{c['id']}" for c in comments] == [site.comment, site.reply]
        assert comments[1]["replyParent"] == comments[0]["id"] == comments[1]["threadRoot"]
        assert comments[0]["content"][0]["block"]["text"] == "Lovely."
        assert listed["authors"][uid]["metadata"]["name"] == "Alice"
        as_resource = await _query(http, "Resource", {"id": site.reply})
        assert as_resource["type"] == "comment" and as_resource["comment"]["id"] == comments[1]["id"]
        events = await _query(http, "ListEvents", {"pageSize": 2, "filterEventType": ["comment"], "order": "observed"})
        assert [e["type"] for e in events["events"]] == ["comment", "comment"] and events["nextPageToken"] == ""
        page = await _query(http, "Query", {"includes": [{"space": uid, "path": "", "mode": "Children"}], "limit": 5})
        assert page["mode"] == "Children" and [r["path"] for r in page["results"]] == [["notes"]]
        info = page["results"][0]
        assert info["metadata"] == {"name": "Notes"} and info["activitySummary"]["commentCount"] == 2
        assert info["sortTime"].endswith("Z")  # a superjson Date
        config = await http.get("/hm/api/config")
        assert config.status_code == 200 and config.json()["registeredAccountUid"] == uid


async def test_publish_blobs_verifies_and_stores_all_or_none(site: Site) -> None:
    bob = KeyPair.generate()
    genesis = blobs.genesis_change(bob)
    ops = [{"type": "SetAttributes", "attrs": [{"key": ["name"], "value": "Bob's page"}]}]
    change = blobs.change(bob, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=ops, ts=blobs.now_ms())
    ref = blobs.ref(
        bob, space=bob.account_id, path="/page", genesis=genesis.cid, heads=[change.cid], generation=1, ts=change.ts
    )
    good = [(str(genesis.cid), genesis.data), (str(change.cid), change.data), (None, ref.data)]
    forged: dict[str, Any] = {**ref.value, "path": "/elsewhere"}  # the signature no longer covers it
    tampered = encode(forged)
    store = site.harness.hypermedia.store
    async with httpx2.AsyncClient(base_url=site.base) as http:
        for items in ([*good[:2], (None, tampered)], [(str(genesis.cid), change.data), *good[1:]]):
            refused = await http.post(
                "/api/PublishBlobs", content=publish_blobs_body(items), headers={"Content-Type": "application/cbor"}
            )
            assert refused.status_code == 400 and refused.json()["error"]
            assert store.data(str(change.cid)) is None  # all or none: the good ones in the batch are not kept
        stored = await http.post(
            "/api/PublishBlobs", content=publish_blobs_body(good), headers={"Content-Type": "application/cbor"}
        )
        assert stored.status_code == 200, stored.text
        assert set(superjson_value(stored.content)["cids"]) == {str(genesis.cid), str(change.cid), str(ref.cid)}
        read = await _query(http, "Resource", {"id": f"hm://{bob.account_id}/page"})
        assert read["type"] == "document" and read["document"]["metadata"] == {"name": "Bob's page"}
        for body, status in ((b"\xff", 400), (encode({"blobs": "no"}), 400)):
            bad = await http.post("/api/PublishBlobs", content=body, headers={"Content-Type": "application/cbor"})
            assert bad.status_code == status and "error" in bad.json()
        wrong_type = await http.post("/api/PublishBlobs", content=b"{}", headers={"Content-Type": "application/json"})
        assert wrong_type.status_code == 415
        unknown = await http.get("/api/Nope")
        assert unknown.status_code == 404 and "Resource" in unknown.json()["error"]
        bad_input = await http.get("/api/Resource?id=not-an-id")
        assert bad_input.status_code == 400 and bad_input.json()["error"]


async def test_a_body_over_the_request_cap_is_refused(harness: Harness, tmp_path: Any) -> None:
    capped = Harness(load_settings(data_dir=tmp_path / "capped"))
    capped.settings = capped.settings.model_copy(update={"hypermedia": HypermediaSettings(max_request_bytes=1024)})
    app = http_app(build_server(capped), host="127.0.0.1", http=HttpSettings(), ipfs=capped)
    try:
        async with serving(app) as base, httpx2.AsyncClient(base_url=base) as http:
            body = publish_blobs_body([(None, b"x" * 2000)])
            got = await http.post("/api/PublishBlobs", content=body, headers={"Content-Type": "application/cbor"})
            assert got.status_code == 413 and "max_request_bytes" in got.json()["error"]
    finally:
        capped.close()


@pytest.mark.parametrize("public", [False, True])
async def test_reads_need_the_token_unless_public_and_publishing_always_does(harness: Harness, public: bool) -> None:
    harness.settings = harness.settings.model_copy(update={"hypermedia": HypermediaSettings(public=public)})
    http_settings = HttpSettings(tokens=[TokenSettings(hash=token_hash("owner-token"), label="owner")])
    app = http_app(build_server(harness), host="127.0.0.1", http=http_settings, ipfs=harness)
    genesis = blobs.genesis_change(KeyPair.generate())
    body = publish_blobs_body([(str(genesis.cid), genesis.data)])
    cbor = {"Content-Type": "application/cbor"}
    owner = {"Authorization": "Bearer owner-token"}
    async with serving(app) as base, httpx2.AsyncClient(base_url=base) as http:
        read = await http.get(f"/api/Account?id={genesis.author}")
        assert read.status_code == (200 if public else 401)
        assert (await http.get(f"/ipfs/{genesis.cid}")).status_code == (404 if public else 401)
        assert (await http.post("/api/PublishBlobs", content=body, headers=cbor)).status_code == 401
        assert (await http.post("/api/PublishBlobs", content=body, headers={**cbor, **owner})).status_code == 200
        assert (await http.get(f"/ipfs/{genesis.cid}", headers=owner)).content == genesis.data
