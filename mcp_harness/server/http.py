"""Streamable HTTP: `/mcp` and `/mcp/sessions/{id}` through one session manager, behind a guard.

The guard, in order: `Host` (DNS rebinding) and `Origin`, parsed and compared exactly (`edge.py`; the SDK's own
check prefix-matches, so it is off); the bearer token, whose hash becomes the request's principal, so an MCP session
answers only the token that opened it (any other gets the SDK's unknown-session 404, byte for byte); the body limit;
a `/mcp/sessions/{id}` naming a session the caller may not see is refused with 404 at connect; and a body the SDK
would answer with a bare parse error gets the JSON-RPC error `wire.parse` names, with the request's id.
"""

from __future__ import annotations

import hmac
import socket
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from mcp_harness.config import HttpSettings, TokenSettings, token_hash
from mcp_harness.errors import BadRequest, HarnessError, NotFound
from mcp_harness.harness import LOCAL_ACCOUNT, Harness
from mcp_harness.scope import Scope as Visibility
from mcp_harness.server import edge, wire
from mcp_harness.server.events import SSE_RETRY_MS, SessionManager

TOKEN_SCOPE_KEY = "mcp_harness.token"
"""Where the HTTP guard leaves the matched token for `binding_for`."""
SessionCheck = Callable[[str, TokenSettings | None], str | None]
"""`(session id, token)` → None when the caller may use the session, else the refusal to send (off the loop)."""
_VISIBLE_CACHE = 4096
SHUTDOWN_GRACE_S = 3
"""How long a stopping server waits for open requests before it cancels them."""


def session_visibility(harness: Harness) -> SessionCheck:
    """The `/mcp/sessions/{id}` rule of `scope.py`: an owner token (or no tokens) sees the account's sessions, a
    token with `agent` set only that agent's; missing and hidden read the same."""

    def check(session_id: str, token: TokenSettings | None) -> str | None:
        agent_id: str | None = None
        if token is not None and token.agent:
            try:
                agent_id = harness.agent(token.agent).id
            except HarnessError:
                agent_id = ""  # a token naming no agent sees nothing
        try:
            Visibility(harness.account_id, agent_id).session(harness.sessions.find(session_id), session_id)
        except NotFound as exc:
            return exc.message
        return None

    return check


def http_app(
    server: Server[Any],
    *,
    host: str,
    http: HttpSettings,
    session_visible: SessionCheck | None = None,
    loopback: bool | None = None,
    console: Harness | None = None,
    hooks: Harness | None = None,
    attachments: Harness | None = None,
    ipfs: Harness | None = None,
    health: Harness | None = None,
) -> Starlette:
    """The ASGI app. `loopback` is whether the bound address is loopback (default: resolve `host`); a non-loopback
    bind without tokens is refused. `session_visible` (see `session_visibility`) refuses `/mcp/sessions/{id}` at
    connect; without it those sessions are checked by the handlers only. `console` (the harness) mounts the web
    console at `/` (`server/console.py`). `hooks` (the harness) mounts webhook deliveries at `/hooks/<trigger id>`
    (`server/hooks.py`). `attachments` (the harness) mounts uploads at `/mcp/sessions/<id>/attachments`
    (`server/attachments_http.py`). `ipfs` (the harness) mounts `GET /ipfs/<cid>` over its block store and signed
    blobs (`server/ipfs_http.py`) and the Seed web API, `/api/<Key>` and `/hm/api/config` (`server/seed_api.py`).
    `health` (the harness) mounts `GET /healthz` for load balancers, without a token (`server/health.py`)."""
    if loopback is None:
        loopback = edge.resolves_to_loopback(host)
    if not loopback and not http.tokens:
        raise BadRequest(
            f"Refusing to serve on {host} without bearer tokens: add [[http.tokens]] to the config (`mcp-harness "
            "token new` prints one), set MCP_HARNESS_HTTP_TOKENS, or bind to 127.0.0.1."
        )
    for token in http.tokens:
        if token.account != LOCAL_ACCOUNT:
            raise BadRequest(
                f"Token {token.label or token.hash[:15]} names account {token.account!r}; this server has one "
                f"account, {LOCAL_ACCOUNT!r}."
            )
    # Off loopback, Host is checked only when hosts are configured: the names clients use for a public bind are not
    # knowable here. Origin is always checked.
    rules = edge.EdgeRules(
        bind_host=host,
        check_hosts=loopback or bool(http.allowed_hosts),
        allowed_hosts=http.allowed_hosts,
        allowed_origins=http.allowed_origins,
    )
    manager = SessionManager(
        app=server,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=http.max_body_bytes,
        retry_interval=SSE_RETRY_MS,
    )
    mcp_asgi = StreamableHTTPASGIApp(manager)
    # The SDK ties each MCP session to the principal of the request that opened it (`scope["user"]`); with no
    # tokens there is one principal, None.
    principals = {
        t.hash: AuthenticatedUser(AccessToken(token=t.hash, client_id=t.hash, scopes=[])) for t in http.tokens
    }
    visible: OrderedDict[tuple[str, str | None], None] = OrderedDict()

    async def refusal_for(session_id: str, token: TokenSettings | None) -> str | None:
        if session_visible is None or (key := (session_id, token.hash if token else None)) in visible:
            return None
        refusal = await anyio.to_thread.run_sync(session_visible, session_id, token)
        if refusal is None:  # only a yes is remembered: a session never changes hands
            visible[key] = None
            while len(visible) > _VISIBLE_CACHE:
                visible.popitem(last=False)
        return refusal

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        """Past the body limit: refuse what the SDK would misanswer, then hand the (replayed) body to it."""
        body = await _read_body(receive) if scope["method"] == "POST" else b""
        token: TokenSettings | None = scope.get(TOKEN_SCOPE_KEY)
        session_id = scope.get("path_params", {}).get("session_id")
        if session_id is not None and (refusal := await refusal_for(session_id, token)) is not None:
            request_id = wire.tolerant_id(body) if body else None
            await _jsonrpc(wire.error(request_id, types.INVALID_PARAMS, refusal), 404)(scope, receive, send)
            return
        content_type = Headers(scope=scope).get("content-type", "").lower()
        if scope["method"] == "POST" and content_type.startswith("application/json"):  # else the SDK refuses it
            parsed = wire.parse(body)
            if isinstance(parsed, types.JSONRPCError):
                status = ERROR_CODE_HTTP_STATUS.get(parsed.error.code, 400)
                await _jsonrpc(parsed, status)(scope, receive, send)
                return
        await mcp_asgi(scope, _replaying(body, receive) if scope["method"] == "POST" else receive, send)

    limited = RequestBodyLimitMiddleware(checked, http.max_body_bytes)
    hashes = [(t, t.hash) for t in http.tokens]

    async def admitted(scope: Scope, receive: Receive, send: Send, *, public: bool = False) -> bool:
        """Host, Origin, then the bearer token (not for `public`: the console's data-free shell and assets); False
        once a refusal is sent."""
        headers = Headers(scope=scope)
        host_header = headers.get("host")
        if not rules.host_allowed(host_header):
            message = f"Host {host_header} is not allowed (see [http] allowed_hosts)."
            await _refuse(421, message)(scope, receive, send)
            return False
        origin = headers.get("origin")
        if origin is not None and not rules.origin_allowed(origin):
            await _refuse(403, f"Origin {origin} is not allowed (see [http] allowed_origins).")(scope, receive, send)
            return False
        if hashes and not public:
            header = headers.get("authorization", "")
            presented = header[7:].strip() if header.lower().startswith("bearer ") else ""
            digest = token_hash(presented) if presented else ""
            matched = next((t for t, h in hashes if hmac.compare_digest(digest, h)), None)
            if matched is None:
                await _refuse(401, "A valid bearer token is required.")(scope, receive, send)
                return False
            scope[TOKEN_SCOPE_KEY] = matched
            scope["user"] = principals[matched.hash]
        return True

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if await admitted(scope, receive, send):
            await limited(scope, receive, send)

    class Endpoint:
        """A raw ASGI endpoint (a class, so Starlette routes every method to it rather than only GET)."""

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await guarded(scope, receive, send)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    endpoint = Endpoint()
    routes: list[BaseRoute] = [Route("/mcp", endpoint=endpoint), Route("/mcp/sessions/{session_id}", endpoint=endpoint)]
    if hooks is not None:  # webhook deliveries: Host and Origin checked, no token (their signature authenticates)
        from mcp_harness.server.hooks import Hooks

        deliveries = Hooks(hooks)

        class HookEndpoint:
            async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
                if await admitted(scope, receive, send, public=True):
                    await deliveries(scope, receive, send)

        routes.append(Route("/hooks/{trigger_id}", endpoint=HookEndpoint()))
    if attachments is not None:  # uploads to a session: the same guard, and the same session rule as its endpoint
        from mcp_harness.server.attachments_http import attachment_routes

        routes += attachment_routes(attachments, admitted, session_visibility(attachments))
    if ipfs is not None:  # published files by CID, behind the same guard (tokens too: see server/ipfs_http.py)
        from mcp_harness.server.ipfs_http import ipfs_routes
        from mcp_harness.server.seed_api import seed_api_routes

        routes += ipfs_routes(ipfs, admitted)
        routes += seed_api_routes(ipfs, admitted)  # the Seed web API over the same node (server/seed_api.py)
    if health is not None:  # no guard: a load balancer probes by address and holds no token; it reveals two words
        from mcp_harness.server.health import health_routes

        routes += health_routes(health)
    if console is not None:  # the web console at `/`, behind the same guard; imported only here, never for stdio
        from mcp_harness.server.console import console_routes

        routes += console_routes(console, admitted)
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.event_logs = manager.event_logs
    return app


def _refuse(status: int, message: str) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _jsonrpc(message: types.JSONRPCError, status: int) -> Response:
    body = message.model_dump_json(by_alias=True, exclude_unset=True)
    return Response(body, status_code=status, media_type="application/json")


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` with the already-read body first (then the real one, which reports a disconnect)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


class HttpListener:
    """Where to serve: the host resolved now (so `loopback` is known before the app is built), bound by `open`."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self._resolved = edge.resolve(host, port)
        self.loopback = edge.all_loopback(self._resolved)
        self.socket: socket.socket | None = None
        self.port = port

    def open(self) -> None:
        self.socket = edge.bind(self._resolved, self._authority(self.port))
        self.port = self.socket.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{self._authority(self.port)}/mcp"

    def _authority(self, port: int) -> str:
        return f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()


def listen_http(host: str, port: int) -> HttpListener:
    """Resolve now and bind on `open()`, so any failure is one line before the banner (`HarnessError`)."""
    return HttpListener(host, port)


async def serve_http(app: Starlette, *, harness: Harness, listener: HttpListener) -> None:
    """Serve the app on the listener's socket until interrupted."""
    import uvicorn

    # A bounded grace: an open stream (a console tab, an MCP GET stream) never ends by itself, and Ctrl-C must not
    # wait on it.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    async with harness.engine_running():  # one engine for every HTTP session
        assert listener.socket is not None, "open() the listener first"
        await uvicorn.Server(config).serve(sockets=[listener.socket])


__all__ = [
    "TOKEN_SCOPE_KEY",
    "HttpListener",
    "SessionCheck",
    "http_app",
    "listen_http",
    "serve_http",
    "session_visibility",
]
