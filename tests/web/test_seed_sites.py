"""Hypermedia first for `read https://…`: a real TLS server on loopback speaking the Seed site protocol.

The site answers `OPTIONS` with `x-hypermedia-id` / `x-hypermedia-version` for its documents and serves them from
`GET /api/Resource?id=…` as superjson-wrapped JSON, exactly as Seed's web app does (HYPERMEDIA §4). The documents it
serves were published by a real embedded node (a second harness), so the JSON is the node's own `HMDocument` shape.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
import uvicorn
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from mcp_harness.config import WebSettings, load_settings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia.ids import parse_hm_id
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
from mcp_harness.identity.identities import create_identity, load_keypair
from mcp_harness.server import build_server
from mcp_harness.web.egress import Egress
from tests.conftest import call, refused
from tests.web.conftest import _self_signed

pytestmark = pytest.mark.anyio
HOST = "seed.test"
CHROME = "<html><body><nav>Site menu</nav><main><p>Scraped page chrome, not the document.</p></main></body></html>"


@pytest.fixture
def publisher(tmp_path: Path) -> tuple[Harness, str]:
    """A second harness standing in for the site's daemon: it publishes the documents the site serves."""
    h = Harness(load_settings(data_dir=tmp_path / "site"))
    identity = create_identity(h, "Site owner")
    node = h.hypermedia
    key = load_keypair(h, identity.name)
    parsed = parse_markdown("# Real content\n\nThe **document** itself.\n")
    node.publish(
        node.create(
            key,
            identity.account_id,
            "/notes",
            metadata_operations({"name": "Notes"}) + document_operations(parsed.tree),
        )
    )
    return h, identity.account_id


def site_app(site: Harness, uid: str) -> Starlette:
    def hm_headers(path: str, version: str | None = None) -> dict[str, str]:
        headers = {"x-hypermedia-id": quote(f"hm://{uid}{path}", safe=""), "x-hypermedia-title": "Notes"}
        if version:
            headers["x-hypermedia-version"] = version
        return headers

    async def page(request: Request) -> Response:
        path = request.url.path
        if request.method == "OPTIONS":
            if path in ("/notes", "/broken", "/vanished"):
                version = site.hypermedia.document(uid, "/notes").version if path == "/notes" else None
                return Response(status_code=200, headers=hm_headers(path, version))
            return Response(status_code=405)
        return HTMLResponse(CHROME)

    async def resource(request: Request) -> Response:
        hm = parse_hm_id(request.query_params["id"])
        path = "".join(f"/{s}" for s in hm.path)
        if path == "/broken":
            return JSONResponse({"error": "daemon unavailable"}, status_code=500)
        if path == "/vanished":
            return JSONResponse({"error": "not found"}, status_code=404)
        document = site.hypermedia.document(hm.uid, path, hm.version)
        return JSONResponse({"json": document.to_json()})

    return Starlette(
        routes=[
            Route("/api/Resource", resource),
            Route("/{path:path}", page, methods=["GET", "OPTIONS"]),
        ]
    )


@pytest.fixture
async def tls_site(tmp_path: Path, publisher: tuple[Harness, str]) -> AsyncIterator[tuple[str, str, Egress]]:
    site, uid = publisher
    cert, key = _self_signed(tmp_path, HOST)
    config = uvicorn.Config(
        site_app(site, uid),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    server = uvicorn.Server(config)
    egress = Egress(
        WebSettings(allow_hosts=[HOST]),
        resolver=lambda host, port: ["127.0.0.1"],
        verify=ssl.create_default_context(cafile=str(cert)),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"https://{HOST}:{port}", uid, egress
        server.should_exit = True
    site.close()


@pytest.fixture
async def web_client(harness: Harness, tls_site: tuple[str, str, Egress]) -> AsyncIterator[Client]:
    harness._web = tls_site[2]  # pyright: ignore[reportPrivateUsage]  # trust the test site's certificate
    async with Client(build_server(harness)) as c:
        yield c


async def test_a_seed_site_url_reads_as_the_document_not_the_page(
    web_client: Client, tls_site: tuple[str, str, Egress]
) -> None:
    base, uid, _ = tls_site
    data = await call(web_client, "read", {"address": f"{base}/notes"})
    assert data["source"] == "hypermedia" and data["id"] == f"hm://{uid}/notes" and data["name"] == "Notes"
    assert "# Real content" in data["markdown"] and "**document**" in data["markdown"]
    assert "Scraped page chrome" not in data["markdown"] and data["version"].startswith("bafyrei")


async def test_a_gateway_url_names_its_document_without_asking(
    web_client: Client, tls_site: tuple[str, str, Egress]
) -> None:
    base, uid, _ = tls_site
    data = await call(web_client, "read", {"address": f"{base}/hm/{uid}/notes", "format": "json"})
    assert data["source"] == "hypermedia" and "The **document** itself." in data["markdown"]


async def test_a_plain_site_falls_through_to_the_web_reader(
    web_client: Client, tls_site: tuple[str, str, Egress]
) -> None:
    base, _, _ = tls_site
    data = await call(web_client, "read", {"address": f"{base}/about"})
    assert "source" not in data and "Scraped page chrome" in data["markdown"]


async def test_a_404_from_the_api_falls_through_but_other_failures_do_not(
    web_client: Client, tls_site: tuple[str, str, Egress]
) -> None:
    base, _, _ = tls_site
    vanished = await call(web_client, "read", {"address": f"{base}/vanished"})
    assert "Scraped page chrome" in vanished["markdown"]
    error = await refused(web_client, "read", {"address": f"{base}/broken"})
    assert error["status"] == 502 and "HTTP 500" in error["message"]


async def test_raw_reads_skip_the_hypermedia_probe(web_client: Client, tls_site: tuple[str, str, Egress]) -> None:
    base, _, _ = tls_site
    raw = await call(web_client, "read", {"address": f"{base}/notes", "options": {"raw": True}})
    assert raw["markdown"] == CHROME


async def test_an_hm_path_that_names_no_account_is_not_taken_for_a_gateway(
    web_client: Client, tls_site: tuple[str, str, Egress]
) -> None:
    base, _, _ = tls_site
    data = await call(web_client, "read", {"address": f"{base}/hm/about"})
    assert "source" not in data and "Scraped page chrome" in data["markdown"]
