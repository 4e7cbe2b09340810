"""The web console's routes, mounted by `http_app` beside `/mcp` and behind the same guard (`http.py`).

The page shell and its script and stylesheet hold no data, so they are served on Host and Origin alone (a browser
navigating cannot attach a bearer token); everything under `/api/` needs what `/mcp` needs: loopback without
tokens, else a bearer token, whose agent (if it names one) is the only one the caller sees (`scope.py`). The shell's
script sends the token from `sessionStorage` as an Authorization header, the live stream included (a streamed
`fetch`, not EventSource, which cannot send headers).

The live stream (`/api/stream`) sends a page's whole HTML fragment whenever its data changes: a wake comes from the
database's commit signal (`console/live.py`), the data is rebuilt and compared by digest, and only a new digest is
sent, with that digest as the event id. A reconnect sends it back as `Last-Event-ID` and gets the page at once if it
changed meanwhile, so a page open for an hour converges however often its connection drops.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Send
from starlette.types import Scope as AsgiScope

from mcp_harness.console import catalog, pages
from mcp_harness.console.live import ChangeFeed
from mcp_harness.errors import Conflict, HarnessError
from mcp_harness.scope import Scope
from mcp_harness.store._util import now_ms

if TYPE_CHECKING:
    from mcp_harness.config import TokenSettings
    from mcp_harness.definition import AgentDefinition
    from mcp_harness.harness import Harness

logger = logging.getLogger(__name__)

Admit = Callable[..., Awaitable[bool]]
"""`http.py`'s guard: `await admit(scope, receive, send, public=False)` is False once it has sent a refusal."""
HEARTBEAT_S = 15.0
"""A comment line this often keeps proxies from closing an idle stream, and re-reads the page as a safety net."""
COALESCE_S = 0.1
"""After sending, a stream waits this long before the next read, so a burst of commits costs one render."""
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
PAGES = (
    "/",
    "/sessions",
    "/sessions/{rest:path}",
    "/runs",
    "/runs/{rest:path}",
    "/agents",
    "/agents/{rest:path}",
    "/triggers",
    "/documents",
    "/documents/{rest:path}",
)
_TOKEN_KEY = "mcp_harness.token"  # `http.TOKEN_SCOPE_KEY`, not imported: http.py imports this module


class Directory:
    """What the console pages read, from the harness: its stores plus grants, providers and identities."""

    def __init__(self, harness: Harness) -> None:
        self._h = harness
        self.settings, self.db, self.account_id = harness.settings, harness.db, harness.account_id
        self.agents, self.sessions, self.tools = harness.agents, harness.sessions, harness.tools
        self.triggers = harness.triggers

    @property
    def runs(self) -> Any:
        return self._h.runs

    def memory(self, agent: Any) -> Any:
        return self._h.memory(agent)

    @property
    def hypermedia(self) -> Any:
        """The embedded node, for the Documents pages (opened on first use, as for `read hm://`)."""
        return self._h.hypermedia

    def grants(self, definition: AgentDefinition) -> dict[str, Any]:
        return self._h.grants(definition)

    def provider_rows(self) -> list[dict[str, Any]]:
        registry = self._h.providers
        rows = []
        for provider in registry.list():
            try:
                key = registry.key_source(provider).describe()
            except HarnessError:
                key = "unavailable"
            rows.append({**provider.to_json(), "key": key})
        return rows

    def identity_rows(self, definition: AgentDefinition) -> list[dict[str, Any]]:
        from mcp_harness.identity.identities import identities_of

        try:
            return [i.to_json() for i in identities_of(self._h, definition)]
        except HarnessError:
            return []


def _asset(name: str) -> bytes:
    return resources.files("mcp_harness.console").joinpath("static", name).read_bytes()


def console_routes(harness: Harness, admit: Admit) -> list[BaseRoute]:
    """The console's routes; every one passes `admit` first (public: the data-free shell and assets)."""
    directory: catalog.Directory = Directory(harness)  # pyright: ignore[reportAssignmentType]
    feed = ChangeFeed(harness.db)
    shell, script, style = _asset("index.html"), _asset("console.js"), _asset("console.css")

    def scope_of(request: Request) -> Scope:
        token: TokenSettings | None = request.scope.get(_TOKEN_KEY)
        if token is None or not token.agent:
            return Scope(harness.account_id)
        try:
            return Scope(harness.account_id, harness.agent(token.agent).id)
        except HarnessError:
            return Scope(harness.account_id, "")  # a token naming no agent sees nothing

    def build(request: Request) -> pages.View:
        params = dict(request.query_params)
        path = params.pop("page", "/")
        return pages.view(directory, scope_of(request), path, params, limits=harness.engine.limits)

    async def page(request: Request) -> Response:
        return Response(shell, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        if request.url.path.endswith(".js"):
            return Response(script, media_type="text/javascript; charset=utf-8", headers=SECURITY_HEADERS)
        return Response(style, media_type="text/css; charset=utf-8", headers=SECURITY_HEADERS)

    async def view_json(request: Request) -> Response:
        try:
            v = await anyio.to_thread.run_sync(build, request)
        except HarnessError as exc:
            return _error(exc)
        now = now_ms()
        body: dict[str, Any] = {"title": v.title, "version": v.version, "now": now}
        if request.url.path.endswith("/data"):
            body["data"] = v.data
        else:
            body["html"] = v.render(now)
        return JSONResponse(body, headers=SECURITY_HEADERS)

    async def stream(request: Request) -> Response:
        try:
            first = await anyio.to_thread.run_sync(build, request)
        except HarnessError as exc:
            return _error(exc)
        return StreamingResponse(
            _events(request, first, build, feed),
            media_type="text/event-stream",
            headers={**SECURITY_HEADERS, "X-Accel-Buffering": "no"},
        )

    async def cancel(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        who = scope_of(request)
        try:
            run = who.run(await anyio.to_thread.run_sync(harness.runs.find, run_id), run_id)
            if run.terminal:
                raise Conflict(f"Run {run_id} already {run.status}; nothing to cancel.")
            affected = await harness.engine.cancel(run.id)
        except HarnessError as exc:
            return _error(exc)
        return JSONResponse({"runId": run_id, "canceled": affected}, headers=SECURITY_HEADERS)

    async def memory_raw(request: Request) -> Response:
        agent, path = request.path_params["agent"], request.query_params.get("path", "")
        try:
            name, data = await anyio.to_thread.run_sync(catalog.memory_bytes, directory, scope_of(request), agent, path)
        except HarnessError as exc:
            return _error(exc)
        disposition = f"attachment; filename*=UTF-8''{quote(name)}"
        headers = {**SECURITY_HEADERS, "Content-Disposition": disposition}
        return Response(data, media_type="application/octet-stream", headers=headers)

    def guarded(handler: Callable[[Request], Awaitable[Response]], *, public: bool = False) -> Any:
        class Endpoint:  # a class, so Starlette hands it the raw ASGI call (see `http.py`)
            async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
                if await admit(scope, receive, send, public=public):
                    response = await handler(Request(scope, receive))
                    await response(scope, receive, send)

        return Endpoint()

    routes: list[BaseRoute] = [Route(p, guarded(page, public=True), methods=["GET"]) for p in PAGES]
    routes += [
        Route("/static/console.js", guarded(asset, public=True), methods=["GET"]),
        Route("/static/console.css", guarded(asset, public=True), methods=["GET"]),
        Route("/api/view", guarded(view_json), methods=["GET"]),
        Route("/api/data", guarded(view_json), methods=["GET"]),
        Route("/api/stream", guarded(stream), methods=["GET"]),
        Route("/api/runs/{run_id}/cancel", guarded(cancel), methods=["POST"]),
        Route("/api/agents/{agent}/memory/raw", guarded(memory_raw), methods=["GET"]),
    ]
    return routes


async def _events(
    request: Request, first: pages.View, build: Callable[[Request], pages.View], feed: ChangeFeed
) -> AsyncIterator[str]:
    sent = request.headers.get("last-event-id")
    current: pages.View | None = first
    yield "retry: 2000\n\n"
    while True:
        generation = feed.generation
        if current is None:
            try:
                current = await anyio.to_thread.run_sync(build, request)
            except HarnessError as exc:  # the thing went away (or out of sight) while watched
                yield f"event: gone\ndata: {json.dumps({'message': exc.message})}\n\n"
                return
        if current.version != sent:
            now = now_ms()
            payload = {"title": current.title, "version": current.version, "now": now, "html": current.render(now)}
            yield f"id: {current.version}\nevent: view\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"
            sent = current.version
        current = None
        if await feed.changed(generation, HEARTBEAT_S) == generation:
            yield ": still here\n\n"
        await anyio.sleep(COALESCE_S)


def _error(exc: HarnessError) -> Response:
    return JSONResponse(exc.to_dict(), status_code=exc.status, headers=SECURITY_HEADERS)


__all__ = ["Admit", "Directory", "console_routes"]
