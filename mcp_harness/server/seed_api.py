"""The Seed web API on `serve --http`: `GET /api/<Key>`, `POST /api/PublishBlobs` and `GET /hm/api/config`.

What the official `@seed-hypermedia/client` (and another harness's push and pull) speaks to a Seed site, answered
by the embedded node (HYPERMEDIA §4): queries decode their query string as the client encodes it and answer
superjson (`hypermedia/web_api.py`), the answers are `hypermedia/web_reads.py`'s, and every refusal is
`{"error": message}` with its 4xx/5xx status.

Who may ask: the same guard as `/mcp` (Host and Origin, then the bearer token whenever tokens are configured), and
reads go without a token only when `[hypermedia] public = true`. PublishBlobs always needs the token (or a loopback
server without tokens, as `/mcp`): what it stores is verified whoever sends it, but storing is still a write. Every
blob posted goes through `node.ingest`, the one gate blobs from elsewhere pass (hash, structure, signature,
capability, size caps), all or none.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.datastructures import Headers, QueryParams
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from mcp_harness.errors import HarnessError, TooLarge
from mcp_harness.hypermedia.web_api import decode_query, parse_publish_blobs, superjson_body
from mcp_harness.server.bodies import read_body

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.hypermedia.web_reads import SeedReads

logger = logging.getLogger(__name__)

Admit = Callable[..., Awaitable[bool]]
"""`http.py`'s guard: `await admit(scope, receive, send, public=…)` is False once it has sent a refusal."""
ACTION_KEYS = ("PublishBlobs",)


def seed_api_routes(harness: Harness, admit: Admit) -> list[BaseRoute]:
    """`/api/{key}` and `/hm/api/config` over the harness's node, behind `admit`."""
    from mcp_harness.hypermedia.web_reads import SeedReads

    settings = harness.settings.hypermedia
    reads: list[SeedReads] = []  # built on first use: the node is not needed until someone asks

    def the_reads() -> SeedReads:
        if not reads:
            reads.append(SeedReads(harness.hypermedia, harness.db))
        return reads[0]

    class ApiEndpoint:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            key = scope["path_params"]["key"]
            method = scope["method"]
            if method == "POST":
                if not await admit(scope, receive, send):
                    return
                response = await _action(harness, key, scope, receive)
            elif method in ("GET", "HEAD"):
                if not await admit(scope, receive, send, public=settings.public):
                    return
                query = QueryParams(scope.get("query_string", b""))
                response = await _answer(lambda: the_reads().answer(key, decode_query(key, query)))
            else:
                response = _error(405, f"/api/{key} takes GET (queries) or POST (actions).", {"Allow": "GET, POST"})
            await response(scope, receive, send)

    class ConfigEndpoint:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if not await admit(scope, receive, send, public=settings.public):
                return
            if scope["method"] not in ("GET", "HEAD"):
                await _error(405, "/hm/api/config takes GET.", {"Allow": "GET"})(scope, receive, send)
                return
            response = await _answer(lambda: _config(harness, scope), plain=True)
            await response(scope, receive, send)

    return [Route("/api/{key}", endpoint=ApiEndpoint()), Route("/hm/api/config", endpoint=ConfigEndpoint())]


async def _answer(produce: Callable[[], Any], *, plain: bool = False) -> Response:
    """Run a blocking answer off the loop; a `HarnessError` becomes `{"error"}` with its status."""
    try:
        value = await anyio.to_thread.run_sync(produce)
    except HarnessError as exc:
        return _error(exc.status, exc.message)
    except Exception:  # the route's top level: the client gets a 500, the log the traceback
        logger.exception("Seed API request failed")
        return _error(500, "The server failed to answer; see its log.")
    if plain:
        return JSONResponse(value)
    return Response(superjson_body(value), media_type="application/json")


async def _action(harness: Harness, key: str, scope: Scope, receive: Receive) -> Response:
    if key not in ACTION_KEYS:
        return _error(404, f"Unknown action key: {key}. This server takes {', '.join(ACTION_KEYS)}.")
    content_type = Headers(scope=scope).get("content-type", "application/cbor").split(";")[0].strip().lower()
    if content_type != "application/cbor":
        return _error(415, f"PublishBlobs takes a DAG-CBOR body (Content-Type: application/cbor), not {content_type}.")
    limit = harness.settings.hypermedia.max_request_bytes
    try:
        body = await read_body(
            receive, limit, f"The PublishBlobs body is over {limit} bytes ([hypermedia] max_request_bytes)."
        )
    except TooLarge as exc:
        return _error(exc.status, exc.message)
    node = harness.hypermedia

    def publish() -> dict[str, Any]:
        cids = node.ingest(parse_publish_blobs(body))
        logger.info("PublishBlobs stored %d blob(s)", len(cids))
        return {"cids": cids}

    return await _answer(publish)


def _config(harness: Harness, scope: Scope) -> dict[str, Any]:
    """The site's `/hm/api/config`: which account it speaks for (the default agent's first signing identity).
    This node is not on the Seed p2p network, so it names no peer and no addresses."""
    from mcp_harness.identity.identities import identities_of

    identities = identities_of(harness, harness.agent().definition)
    account = identities[0].account_id if identities else ""
    headers = Headers(scope=scope)
    scheme = scope.get("scheme", "http")
    return {
        "registeredAccountUid": account,
        "peerId": "",
        "protocolId": "",
        "signerAccountUid": account,
        "addrs": [],
        "hostname": f"{scheme}://{headers.get('host', '')}",
        "isGateway": False,
        "notifyServiceHost": None,
    }


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


__all__ = ["ACTION_KEYS", "seed_api_routes"]
