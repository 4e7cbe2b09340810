"""The mounted servers, behind the domain's `Upstreams` seam (callables/upstream.py).

While the harness serves (`attach`, from `Harness.engine_running`) each server gets a supervised connection, started
on its first use and kept warm; without an engine (a one-shot CLI command) every operation opens its own connection
and closes it. Every failure becomes a `HarnessError` naming the server, so one broken upstream reads as that
server's failure and never as the harness's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcp_harness.callables.upstream import Interrupted, ServerSpec, UpstreamProgress, UpstreamResult, UpstreamTool
from mcp_harness.errors import HarnessError, NotFound, Upstream
from mcp_harness.store.upstream import SyncReport
from mcp_harness.upstream.connection import Connected, Connection, Resolved, describe, list_tools, open_client

logger = logging.getLogger(__name__)

CLOSE_WAIT_S = 6.0
"""How long stopping waits for the servers to exit (the SDK gives a stdio server 2 s, then SIGTERM, then SIGKILL)."""


def _json(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class UpstreamPool:
    """Connections to the mounted servers. `specs`, `secret` and `sync` block: they run on worker threads."""

    def __init__(
        self,
        specs: Callable[[], dict[str, ServerSpec]],
        secret: Callable[[str], str],
        sync: Callable[[str, list[UpstreamTool]], SyncReport],
    ) -> None:
        self._specs = specs
        self._secret = secret
        self._sync = sync
        self._tg: anyio.abc.TaskGroup | None = None
        self._connections: dict[str, Connection] = {}

    # -- lifetime ----------------------------------------------------------------------------------------------

    def attach(self, tg: anyio.abc.TaskGroup) -> None:
        """Keep connections warm in `tg` (the serving engine's task group) from now on."""
        self._tg = tg

    async def aclose(self) -> None:
        """Stop every server (stdio processes get the SDK's close-stdin, then terminate, sequence)."""
        connections = list(self._connections.values())
        self._connections.clear()
        self._tg = None
        for conn in connections:
            await conn.stop()
        with anyio.move_on_after(CLOSE_WAIT_S):
            for conn in connections:
                await conn.done.wait()

    async def warm(self, servers: list[str]) -> None:
        """Start these servers now (those without stored documents yet: their tools must be listed once)."""
        if self._tg is None:
            return
        for name in servers:
            try:
                (await self._connection(name)).start(self._tg)
            except HarnessError as exc:
                logger.warning("%s", exc.message)

    def status(self) -> dict[str, bool]:
        """Which servers have a live connection in this process."""
        return {name: conn.up for name, conn in self._connections.items()}

    # -- the seam ----------------------------------------------------------------------------------------------

    async def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], progress: UpstreamProgress | None = None
    ) -> UpstreamResult:
        relay: ProgressFnT | None = None
        if progress is not None:
            report = progress

            async def relaying(progress: float, total: float | None, message: str | None) -> None:
                await report(progress, total, message)

            relay = relaying
        async with self._client(server) as (connected, spec):
            with _failures(server, f"tool {tool}", spec.timeout_s):
                result = await connected.call_tool(tool, arguments, relay)
        structured = result.structured_content
        if structured is not None and not isinstance(structured, dict):
            structured = {"value": structured}  # a 2026-era bare value; our result's structured form is an object
        return UpstreamResult(
            content=tuple(_json(block) for block in result.content),
            structured=structured,  # pyright: ignore[reportUnknownArgumentType]
            is_error=result.is_error,
            meta=dict(result.meta) if result.meta else None,
        )

    async def list_resources(self, server: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        async with self._client(server) as (connected, spec):
            client = connected.client
            with _failures(server, "resources/list", spec.timeout_s):
                cursor: str | None = None
                for _ in range(20):
                    page = await client.list_resources(cursor=cursor, cache_mode="bypass")
                    out += [_json(r) for r in page.resources]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        return out

    async def read_resource(self, server: str, uri: str) -> list[dict[str, Any]]:
        async with self._client(server) as (connected, spec):
            with _failures(server, f"resource {uri}", spec.timeout_s):
                result = await connected.client.read_resource(uri)
        return [_json(c) for c in result.contents]

    async def refresh(self, server: str) -> SyncReport:
        """List the server's tools now and rewrite the documents that changed."""
        async with self._client(server) as (connected, spec):
            with _failures(server, "tools/list", spec.timeout_s):
                tools = await list_tools(server, connected.client)
        return await anyio.to_thread.run_sync(self._sync, server, tools)

    # -- connections -------------------------------------------------------------------------------------------

    async def _spec(self, server: str) -> ServerSpec:
        specs = await anyio.to_thread.run_sync(self._specs)
        spec = specs.get(server)
        if spec is None:
            names = ", ".join(specs) or "none (`mcp-harness mcp add` mounts one)"
            raise NotFound(f"No MCP server named {server} is mounted. Mounted: {names}.")
        return spec

    async def _connection(self, server: str) -> Connection:
        conn = self._connections.get(server)
        if conn is None:
            spec = await self._spec(server)
            conn = self._connections.setdefault(server, Connection(spec, self._resolve, self._store_tools))
        return conn

    async def _resolve(self, spec: ServerSpec) -> Resolved:
        names = [*spec.env_secrets.values(), *([spec.bearer_secret] if spec.bearer_secret else [])]
        out: Resolved = {}
        for name in names:
            try:
                out[name] = await anyio.to_thread.run_sync(self._secret, name)
            except HarnessError as exc:
                raise Upstream(f"MCP server {spec.name} cannot start: {exc.message}") from None
        return out

    async def _store_tools(self, server: str, tools: list[UpstreamTool]) -> None:
        await anyio.to_thread.run_sync(self._sync, server, tools)

    @asynccontextmanager
    async def _client(self, server: str) -> AsyncIterator[tuple[Connected, ServerSpec]]:
        if self._tg is not None:
            conn = await self._connection(server)
            client = await conn.client(self._tg)
            try:
                yield client, conn.spec
            except Interrupted:
                conn.crashed()
                raise
            return
        spec = await self._spec(server)  # no engine: a connection for this one operation
        secrets = await self._resolve(spec)
        with _failures(server, "start", spec.timeout_s, starting=True):
            async with open_client(spec, secrets, anyio.Event()) as connected:
                yield connected, spec


class _failures:  # noqa: N801 - used as a `with` statement, like the function it replaced
    """Every way an upstream operation fails, as an error naming the server (HarnessErrors pass through).

    A class over a bare CancelScope rather than a generator around `anyio.fail_after`: on the relayed-call path
    the two generator layers cost more than writing the request to the server did."""

    __slots__ = ("_scope", "_server", "_starting", "_timeout_s", "_what")

    def __init__(self, server: str, what: str, timeout_s: float, *, starting: bool = False) -> None:
        self._server, self._what, self._timeout_s, self._starting = server, what, timeout_s, starting
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> None:
        if not self._starting:
            self._scope = anyio.CancelScope(deadline=anyio.current_time() + self._timeout_s)
            self._scope.__enter__()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if self._scope is not None:
            self._scope.__exit__(kind, exc, tb)  # swallows the cancellation it caused
            if self._scope.cancelled_caught:
                raise Upstream(
                    f"MCP server {self._server} did not answer {self._what} within {self._timeout_s:g}s (its "
                    "timeout); whether it took effect is unknown."
                ) from None
        if exc is None or isinstance(exc, HarnessError) or not isinstance(exc, Exception):
            return  # nothing, ours, or a cancellation from further out: it goes on as it is
        leaf = _leaf(exc)
        if isinstance(leaf, HarnessError):  # raised in the body of the SDK's task groups, which wrap it
            raise leaf from None
        raise _mapped(self._server, self._what, leaf, starting=self._starting) from None


def _leaf(exc: Exception) -> Exception:
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _mapped(server: str, what: str, exc: Exception, *, starting: bool) -> HarnessError:
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            if starting:
                return Upstream(f"MCP server {server} is not running: it closed the connection while starting.")
            return Interrupted(
                f"MCP server {server} stopped while running {what}: the call was interrupted and whether it took "
                "effect is unknown. The server is being restarted; verify its state before retrying."
            )
        return Upstream(f"MCP server {server} refused {what}: {exc.error.message} (JSON-RPC error {exc.code}).")
    if isinstance(exc, ValidationError):
        return Upstream(f"MCP server {server} answered {what} with something that is not MCP (protocol error).")
    if starting:
        return Upstream(f"MCP server {server} is not running: {describe(exc)}.")
    return Upstream(f"MCP server {server} failed during {what}: {describe(exc)}.")
