"""The web (DESIGN §6, HARNESS §3 fromUrl, §5 web_search, §11.2): real HTTP servers on loopback, through the MCP
client, plus unit tests of the address rules."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from mcp_harness.config import WebSettings, load_settings
from mcp_harness.errors import Forbidden, Upstream
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from mcp_harness.web.egress import Egress, blocked_rule
from tests.conftest import call, refused, serving
from tests.web.conftest import _self_signed

pytestmark = pytest.mark.anyio

ARTICLE = """<!doctype html><html><head><title>The Article</title><meta charset="utf-8"></head><body>
<header><a href="/">Site home</a></header>
<nav><ul><li><a href="/a">Nav link</a></li></ul></nav>
<div class="cookie-banner">Accept cookies</div>
<main><article><h1>Heading One</h1><p>Body text with a <a href="/other">relative link</a>.</p>
<ul><li>first item</li><li>second item</li></ul>
<pre><code>print("hi")</code></pre>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<script>var tracking = 1;</script><form><input name="q"></form></article></main>
<aside>Related stories</aside><footer>Copyright footer</footer></body></html>"""


async def _slow(request: Request) -> Response:
    await anyio.sleep(3)
    return Response("late")


async def _endless(request: Request) -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65536
            await anyio.sleep(0)

    return StreamingResponse(chunks(), media_type="text/plain")


def _searx(request: Request) -> JSONResponse:
    engines = request.query_params.get("engines")
    results = [{"title": "Result A", "url": "https://a.example/", "content": "snippet  A", "engine": "bing"}]
    if engines:
        return JSONResponse({"results": [{"title": "B", "url": "https://b.example/", "engine": "brave"}]})
    return JSONResponse({"results": results, "unresponsive_engines": [["google", "timeout"]], "q": request.url.query})


ROUTES = [
    Route("/article", lambda r: Response(ARTICLE, media_type="text/html")),
    Route("/plain", lambda r: Response("just text\n", media_type="text/plain")),
    Route("/json", lambda r: JSONResponse({"a": 1})),
    Route("/md", lambda r: Response("# Title\n\n*md*", media_type="text/markdown")),
    Route("/bin", lambda r: Response(b"\x89PNG\r\n\x1a\n\0\0", media_type="image/png")),
    Route("/latin1", lambda r: Response("café".encode("latin-1"), headers={"content-type": "text/plain"})),
    Route(
        "/meta-latin1",
        lambda r: Response(
            b'<html><head><meta charset="iso-8859-1"><title>t</title></head><body><p>caf\xe9</p></body></html>',
            headers={"content-type": "text/html"},
        ),
    ),
    Route("/wrong-utf8", lambda r: Response(b"caf\xe9", headers={"content-type": "text/plain; charset=utf-8"})),
    Route("/big", lambda r: Response("é" * 150_000, media_type="text/plain")),
    Route("/r1", lambda r: RedirectResponse("/r2")),
    Route("/r2", lambda r: RedirectResponse("/article", status_code=301)),
    Route("/loop", lambda r: RedirectResponse("/loop")),
    Route("/to-private", lambda r: RedirectResponse("http://10.0.0.1/secret")),
    Route("/to-localhost", lambda r: RedirectResponse(f"http://localhost:{r.url.port}/article")),
    Route("/slow", _slow),
    Route("/endless", _endless),
    Route("/missing", lambda r: Response("no", status_code=404)),
    Route("/files/report.csv", lambda r: Response("a,b\n1,2\n", media_type="text/csv")),
    Route("/noext", lambda r: Response("{}", media_type="application/json")),
    Route("/search", _searx),
    Route("/echo", lambda r: JSONResponse({"host": r.headers["host"], "ua": r.headers["user-agent"]})),
]


@pytest.fixture
async def site() -> AsyncIterator[str]:
    async with serving(Starlette(routes=ROUTES), lifespan="off", force_exit=True) as base:
        yield base


def _harness(tmp_path: Path, **web: Any) -> Harness:
    return Harness(load_settings(data_dir=tmp_path / "data", web={"read_timeout_s": 1.0, **web}))


@pytest.fixture
def web_harness(tmp_path: Path) -> Iterator[Harness]:
    h = _harness(tmp_path, allow_hosts=["127.0.0.1"], max_download_bytes=100_000, max_page_bytes=1_000_000)
    yield h
    h.close()


@pytest.fixture
async def web_client(web_harness: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(web_harness), mode="legacy") as c:
        yield c


# -- address rules ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "rule"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "CGNAT"),
        ("100.127.255.254", "CGNAT"),
        ("169.254.1.1", "link-local"),
        ("169.254.169.254", "cloud-metadata"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "broadcast"),
        ("192.0.2.1", "reserved"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("ff02::1", "multicast"),
        ("fd00:ec2::254", "cloud-metadata"),
        ("::ffff:127.0.0.1", "loopback (IPv4 127.0.0.1 embedded in IPv6)"),
        ("::ffff:169.254.169.254", "cloud-metadata (IPv4 169.254.169.254 embedded in IPv6)"),
        ("64:ff9b::10.0.0.1", "private (IPv4 10.0.0.1 embedded in IPv6)"),
        ("2002:c0a8:0101::1", "private (IPv4 192.168.1.1 embedded in IPv6)"),
        ("2002:7f00:0001::", "loopback (IPv4 127.0.0.1 embedded in IPv6)"),
        ("::192.168.0.1", "private (IPv4 192.168.0.1 embedded in IPv6)"),
        ("::100.64.0.1", "CGNAT (IPv4 100.64.0.1 embedded in IPv6)"),
    ],
)
def test_every_blocked_range_names_its_rule(address: str, rule: str) -> None:
    assert blocked_rule(ipaddress.ip_address(address)) == rule


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8"]
)
def test_public_addresses_pass(address: str) -> None:
    assert blocked_rule(ipaddress.ip_address(address)) is None


def test_a_name_resolving_to_a_private_address_is_refused_unless_allowed_by_name() -> None:
    def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.7"] if host == "mixed.example" else ["127.0.0.1"]

    egress = Egress(WebSettings(), resolver=resolver)
    with pytest.raises(Forbidden) as info:
        egress.check("https://mixed.example/")
    assert "private" in info.value.message and "[web] allow_hosts" in info.value.message
    with pytest.raises(Forbidden):
        egress.check("http://[::ffff:7f00:1]/")
    allowed = Egress(WebSettings(allow_hosts=["intranet.example"]), resolver=resolver)
    assert allowed.check("http://intranet.example:8080/x").address == "127.0.0.1"
    with pytest.raises(Forbidden):
        allowed.check("http://localhost/")  # the allowance names a host, not the addresses it resolves to


async def test_https_connects_to_the_checked_address_with_the_name_for_host_sni_and_certificate(
    tmp_path: Path,
) -> None:
    """The resolver is asked once; the connection goes to that IP while TLS verifies the certificate for the name."""
    import ssl

    cert, key = _self_signed(tmp_path, "pinned.test")
    app = Starlette(routes=[Route("/", lambda r: JSONResponse({"host": r.headers["host"]}))])
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ssl_certfile=cert, ssl_keyfile=key
    )
    server = uvicorn.Server(config)
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    context = ssl.create_default_context(cafile=str(cert))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        allowed = Egress(WebSettings(allow_hosts=["pinned.test"]), resolver=resolver, verify=context)

        def fetch(egress: Egress, url: str) -> bytes:
            with egress.open(url) as response:
                return response.read(1000).data

        body = await anyio.to_thread.run_sync(fetch, allowed, f"https://pinned.test:{port}/")
        assert json.loads(body) == {"host": f"pinned.test:{port}"} and asked == ["pinned.test"]
        # The same server under a name its certificate does not carry fails verification: SNI is the name, not the IP.
        other = Egress(WebSettings(allow_hosts=["other.test"]), resolver=resolver, verify=context)
        with pytest.raises(Upstream) as info:
            await anyio.to_thread.run_sync(fetch, other, f"https://other.test:{port}/")
        assert "CERTIFICATE_VERIFY_FAILED" in info.value.message
        # And without the allowance, the name resolving to loopback is refused before any connection.
        with pytest.raises(Forbidden):
            await anyio.to_thread.run_sync(
                fetch, Egress(WebSettings(), resolver=resolver), f"https://pinned.test:{port}/"
            )
        server.should_exit = True


# -- read https:// ------------------------------------------------------------------------------------------------


async def test_an_article_page_reads_as_its_main_content_in_markdown(web_client: Client, site: str) -> None:
    data = await call(web_client, "read", {"address": f"{site}/article", "format": "json"})
    md = data["markdown"]
    assert data["title"] == "The Article" and data["contentType"] == "text/html" and data["url"] == f"{site}/article"
    assert "# Heading One" in md and "first item" in md and f"({site}/other)" in md
    assert "```" in md and 'print("hi")' in md and "k| v" in md and "---|---" in md
    for boilerplate in ("Nav link", "Site home", "Accept cookies", "tracking", "Related stories", "Copyright"):
        assert boilerplate not in md
    raw = await call(web_client, "read", {"address": f"{site}/article", "options": {"raw": True}})
    assert raw["markdown"] == ARTICLE


async def test_text_json_and_markdown_come_back_as_they_are(web_client: Client, site: str) -> None:
    assert (await call(web_client, "read", {"address": f"{site}/plain"}))["markdown"] == "just text\n"
    assert json.loads((await call(web_client, "read", {"address": f"{site}/json"}))["markdown"]) == {"a": 1}
    assert (await call(web_client, "read", {"address": f"{site}/md"}))["markdown"] == "# Title\n\n*md*"
    binary = await call(web_client, "read", {"address": f"{site}/bin"})
    assert binary["contentType"] == "image/png" and binary["markdown"] == ""
    assert "fromUrl" in binary["summary"]


async def test_the_pinned_connection_keeps_the_host_header_and_user_agent(web_client: Client, site: str) -> None:
    echo = json.loads((await call(web_client, "read", {"address": f"{site}/echo"}))["markdown"])
    assert echo == {"host": site.removeprefix("http://"), "ua": "mcp-harness/0.1.0"}


async def test_charsets_declared_meta_and_wrong(web_client: Client, site: str) -> None:
    # No charset declared on a latin-1 body: UTF-8 with replacement, never a failure.
    assert (await call(web_client, "read", {"address": f"{site}/latin1"}))["markdown"] == "caf\ufffd"
    meta = await call(web_client, "read", {"address": f"{site}/meta-latin1"})
    assert meta["markdown"] == "café" and meta["charset"] == "iso8859-1"
    assert (await call(web_client, "read", {"address": f"{site}/wrong-utf8"}))["markdown"] == "caf\ufffd"


async def test_long_output_is_bounded_on_a_character_boundary_and_pages(web_client: Client, site: str) -> None:
    first = await call(web_client, "read", {"address": f"{site}/big"})
    assert len(first["markdown"].encode()) <= 200 * 1024 and set(first["markdown"]) == {"é"}
    assert first["nextOffset"] == len(first["markdown"]) and first["totalChars"] == 150_000
    assert "options {offset:" in first["summary"]
    rest = await call(web_client, "read", {"address": f"{site}/big", "options": {"offset": first["nextOffset"]}})
    assert len(first["markdown"]) + len(rest["markdown"]) == 150_000 and "nextOffset" not in rest
    window = await call(web_client, "read", {"address": f"{site}/big", "options": {"offset": 10, "length": 5}})
    assert window["markdown"] == "é" * 5 and window["nextOffset"] == 15


async def test_redirects_are_followed_and_each_hop_rechecked(web_client: Client, site: str) -> None:
    data = await call(web_client, "read", {"address": f"{site}/r1"})
    assert data["url"] == f"{site}/article" and data["title"] == "The Article"
    error = await refused(web_client, "read", {"address": f"{site}/to-private"})
    assert error["status"] == 403 and "10.0.0.1" in error["message"] and "[web] allow_hosts" in error["message"]
    error = await refused(web_client, "read", {"address": f"{site}/to-localhost"})
    assert error["status"] == 403 and "loopback" in error["message"] and "'localhost'" in error["message"]
    error = await refused(web_client, "read", {"address": f"{site}/loop"})
    assert error["status"] == 502 and "max_redirects" in error["message"]


async def test_slow_servers_time_out_and_endless_bodies_are_cut(web_client: Client, site: str) -> None:
    with anyio.fail_after(20):
        error = await refused(web_client, "read", {"address": f"{site}/slow"})
        assert error["status"] == 502 and "read_timeout_s" in error["message"]
        cut = await call(web_client, "read", {"address": f"{site}/endless", "options": {"length": 10}})
        assert cut["downloadTruncated"] is True and "max_page_bytes" in cut["summary"]
        error = await refused(
            web_client, "write", {"address": "~/memory/e.txt", "options": {"fromUrl": f"{site}/endless"}}
        )
        assert error["status"] == 413 and "max_download_bytes" in error["message"]
    missing = await refused(web_client, "read", {"address": f"{site}/missing"})
    assert missing["status"] == 404


async def test_without_the_allowance_the_loopback_server_is_refused(tmp_path: Path, site: str) -> None:
    h = _harness(tmp_path)
    try:
        async with Client(build_server(h), mode="legacy") as c:
            error = await refused(c, "read", {"address": f"{site}/article"})
            assert error["status"] == 403 and "loopback" in error["message"]
            assert "'127.0.0.1' to [web] allow_hosts" in error["message"]
            error = await refused(c, "write", {"address": "~/memory/", "options": {"fromUrl": f"{site}/plain"}})
            assert error["status"] == 403
            error = await refused(c, "read", {"address": "http://169.254.169.254/latest/meta-data/"})
            assert "cloud-metadata" in error["message"]
    finally:
        h.close()


# -- write fromUrl ------------------------------------------------------------------------------------------------


async def test_from_url_downloads_into_memory(web_client: Client, web_harness: Harness, site: str) -> None:
    data = await call(web_client, "write", {"address": "~/memory/", "options": {"fromUrl": f"{site}/files/report.csv"}})
    assert (
        data["path"] == "downloads/report.csv" and data["size"] == 8 and data["finalUrl"] == f"{site}/files/report.csv"
    )
    assert (await call(web_client, "read", {"address": "~/memory/downloads/report.csv"}))["content"] == "a,b\n1,2\n"
    data = await call(web_client, "write", {"address": "~/memory/got/", "options": {"fromUrl": f"{site}/noext"}})
    assert data["path"] == "got/noext.json"
    data = await call(web_client, "write", {"address": "~/memory/page", "options": {"fromUrl": f"{site}/r1"}})
    assert data["path"] == "page.html" and data["finalUrl"] == f"{site}/article"
    error = await refused(web_client, "write", {"address": "~/memory/x", "options": {"fromUrl": "ftp://example.com/x"}})
    assert error["status"] == 400
    error = await refused(web_client, "write", {"address": "~/memory/x", "options": {"fromUrl": f"{site}/missing"}})
    assert error["status"] == 502


# -- web_search ---------------------------------------------------------------------------------------------------


async def test_web_search_is_offered_only_when_configured(tmp_path: Path, site: str) -> None:
    plain = _harness(tmp_path / "a")
    configured = _harness(tmp_path / "b", allow_hosts=["127.0.0.1"], searxng_url=site)
    try:
        assert "web_search" not in plain.offered_callables()
        assert "web_search" in configured.offered_callables()
        async with Client(build_server(configured), mode="legacy") as c:
            data = await call(c, "call", {"tool": "web_search", "input": {"query": "x y", "timeRange": "week"}})
        assert data["partial"] is True and data["failedEngines"] == ["google"]
        assert [r["url"] for r in data["results"]] == ["https://a.example/", "https://b.example/"]
        assert data["results"][0] == {
            "title": "Result A",
            "url": "https://a.example/",
            "snippet": "snippet A",
            "engine": "bing",
        }
        assert "google" in data["summary"] and "1. [Result A](https://a.example/)" in data["markdown"]
    finally:
        plain.close()
        configured.close()
