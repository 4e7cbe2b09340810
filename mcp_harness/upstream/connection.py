"""One mounted server's connection: opened with the SDK's `Client` on first use, kept warm, restarted on crash.

A supervisor task owns the `Client` context (an SDK client must be entered and left by one task) and calls are made
from the callers' own tasks. The transport's read stream is watched, so a server that exits is noticed at once, not
at the next call: the supervisor then reconnects after a backoff (doubling from BACKOFF_S to BACKOFF_MAX_S, reset
once a connection has stayed up for STABLE_S). A `tools/list_changed` notification re-lists the tools there too: sent
unasked by a handshake-era server, on the `subscriptions/listen` stream held open to a 2026-07-28 one.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.dispatcher import ProgressFnT

from mcp_harness.callables.upstream import ServerSpec, UpstreamTool
from mcp_harness.errors import HarnessError, Upstream
from mcp_harness.upstream.lean import LeanCalls
from mcp_harness.upstream.stdio_pipe import stdio_pipe

logger = logging.getLogger(__name__)

BACKOFF_S = 0.25
BACKOFF_MAX_S = 30.0
STABLE_S = 60.0
LIST_PAGES = 50
"""A server whose tools/list pages never end is cut off here (50 pages is thousands of tools)."""

Resolved = dict[str, str]
"""A spec's secret values by secret name, resolved off the event loop by the pool."""


class _Watched(anyio.abc.ObjectReceiveStream[Any]):
    """The transport's read stream, telling its owner when it ends (the server exited or hung up)."""

    def __init__(self, inner: anyio.abc.ObjectReceiveStream[Any], ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def last_context(self) -> Any:
        """The sender's contextvars snapshot, which the SDK's dispatcher reads off a Streamable HTTP stream."""
        return getattr(self._inner, "last_context", None)


@dataclass(frozen=True, slots=True)
class Connected:
    """An open connection: the SDK client, and on stdio the lean `tools/call` path beside it."""

    server: str
    client: Client
    lean: LeanCalls | None

    async def call_tool(
        self, name: str, arguments: dict[str, Any], progress: ProgressFnT | None
    ) -> types.CallToolResult:
        """`tools/call` by the lean path where there is one (stdio), else by the SDK client.

        Raises:
            MCPError: a JSON-RPC error or a closed connection; Upstream: a result that asks for input we cannot give.
            pydantic.ValidationError: a result that is not a CallToolResult.
        """
        if self.lean is None:
            return await self.client.call_tool(name, arguments, progress_callback=progress)
        stamp = self.client.session._stamp  # pyright: ignore[reportPrivateUsage] - the era's own request stamp
        raw = await self.lean.call_tool(stamp, name, arguments, progress)
        if isinstance(raw, dict) and raw.get("resultType") == "input_required":
            raise Upstream(
                f"MCP server {self.server} asked for input during tool {name} (elicitation, sampling or roots), "
                "which the harness does not give an upstream server."
            )
        return types.CallToolResult.model_validate(raw, by_name=False)


@asynccontextmanager
async def open_client(
    spec: ServerSpec, secrets: Resolved, ended: anyio.Event, on_message: MessageHandlerFnT | None = None
) -> AsyncIterator[Connected]:
    """A connected SDK client of `spec` (either protocol era: `mode="auto"` probes and falls back)."""
    http: Any = None
    lean: list[LeanCalls] = []
    if spec.url:
        import httpx2

        headers = dict(spec.headers)
        if spec.bearer_secret:
            headers["Authorization"] = f"Bearer {secrets[spec.bearer_secret]}"
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        inner: Any = streamable_http_client(spec.url, http_client=http)
    else:
        env = dict(spec.env) | {key: secrets[name] for key, name in spec.env_secrets.items()}
        inner = _stdio(list(spec.command), env, lean)

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with inner as (read, write):
            yield _Watched(read, ended), write

    try:
        async with Client(transport(), mode="auto", message_handler=on_message, cache=None) as client:
            yield Connected(spec.name, client, lean[0] if lean else None)
    finally:
        if http is not None:
            await http.aclose()


@asynccontextmanager
async def _stdio(command: list[str], env: dict[str, str], lean: list[LeanCalls]) -> AsyncIterator[Any]:
    """The stdio transport: ours with the lean call path (POSIX), else the SDK's."""
    if sys.platform == "win32":
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        async with stdio_client(params, errlog=_errlog()) as streams:
            yield streams
        return
    async with stdio_pipe(command, env, _errlog()) as (streams, calls):
        lean.append(calls)
        yield streams


_DEVNULL: Any = None


def _errlog() -> Any:
    """Where a stdio server's stderr (its log) goes: ours, which is the harness's log too (stdout is the JSON-RPC
    stream when we serve over stdio); /dev/null when ours is not a real file (a host that captured it)."""
    global _DEVNULL
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        if _DEVNULL is None:
            _DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - kept open for every later server
        return _DEVNULL


def tool_of(server: str, tool: types.Tool) -> UpstreamTool:
    annotations = tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if tool.annotations else {}
    if tool.title and "title" not in annotations:
        annotations["title"] = tool.title
    return UpstreamTool(
        server=server,
        tool=tool.name,
        description=tool.description or "",
        input=dict(tool.input_schema),
        output=dict(tool.output_schema) if tool.output_schema is not None else None,
        annotations=annotations or None,
    )


async def list_tools(server: str, client: Client) -> list[UpstreamTool]:
    tools: list[UpstreamTool] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools += [tool_of(server, t) for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


class Connection:
    """The supervised connection of one server. `client()` starts it on first use and waits for it to be up."""

    def __init__(
        self,
        spec: ServerSpec,
        resolve: Callable[[ServerSpec], Awaitable[Resolved]],
        on_tools: Callable[[str, list[UpstreamTool]], Awaitable[None]],
    ) -> None:
        self.spec = spec
        self._resolve = resolve
        self._on_tools = on_tools
        self._client: Connected | None = None
        self._failure: str | None = None
        self._changed = anyio.Event()
        self._ended = anyio.Event()
        self._relist = anyio.Event()
        self._stopping = False
        self._started = False
        self._start_failed = False
        """Whether the last attempt failed before the server was up (else it is up, or it was up and exited)."""
        self.restarts = 0
        self.done = anyio.Event()
        """Set when the supervisor has left (after `stop`, its server closed)."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def up(self) -> bool:
        return self._client is not None

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        if not self._started:
            self._started = True
            tg.start_soon(self._supervise)

    async def client(self, tg: anyio.abc.TaskGroup) -> Connected:
        """The connected client, starting the server if it is not running (waits at most its timeout).

        Raises:
            Upstream: it could not be started, naming the server and why.
        """
        if self._client is not None and not self._ended.is_set():
            return self._client  # up: every call but the first takes this path, so no timeout scope for it
        # Down (starting, or waiting out a backoff): the next attempt's outcome decides, so a server that cannot
        # start fails the call at once with its reason instead of after the whole timeout.
        with anyio.move_on_after(self.spec.timeout_s):
            while True:
                if self._client is not None and not self._ended.is_set():
                    return self._client
                self.start(tg)
                await self._changed.wait()
                if self._start_failed:
                    raise Upstream(f"MCP server {self.name} is not running: {self._failure or 'it exited'}.")
        raise Upstream(f"MCP server {self.name} is not running: it did not start within {self.spec.timeout_s:g}s.")

    def crashed(self) -> None:
        """A call saw the connection close: reconnect (the watched stream usually noticed first)."""
        self._ended.set()

    async def stop(self) -> None:
        self._stopping = True
        self._ended.set()
        if not self._started:
            self.done.set()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()  # re-listed by the supervisor: the read loop must not wait on a request

    async def _supervise(self) -> None:
        try:
            await self._reconnecting()
        finally:
            self.done.set()

    async def _reconnecting(self) -> None:
        delay = BACKOFF_S
        while not self._stopping:
            began = anyio.current_time()
            self._ended = anyio.Event()
            was_up = False
            try:
                secrets = await self._resolve(self.spec)
                async with open_client(self.spec, secrets, self._ended, self._on_message) as connected:
                    await self._on_tools(self.name, await list_tools(self.name, connected.client))
                    self._client, self._failure, self._start_failed = connected, None, False
                    was_up = True
                    self._notify()
                    await self._serve(connected.client)
            except HarnessError as exc:
                self._failure = exc.message
            except Exception as exc:  # one broken upstream never takes the others (or the harness) down
                self._failure = describe(exc)
                logger.warning("MCP server %s failed: %s", self.name, self._failure)
            finally:
                self._client = None
            self._start_failed = not was_up
            self.restarts += 1
            if self._failure is None:
                self._failure = "it exited"
            self._notify()
            if self._stopping:
                break
            if anyio.current_time() - began > STABLE_S:
                delay = BACKOFF_S
            logger.info("MCP server %s stopped (%s); restarting in %.2fs", self.name, self._failure, delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    async def _serve(self, client: Client) -> None:
        """Until the server goes away: re-list its tools whenever it says they changed."""
        async with anyio.create_task_group() as tg:

            async def relist() -> None:
                while True:
                    await self._relist.wait()
                    self._relist = anyio.Event()
                    try:
                        await self._on_tools(self.name, await list_tools(self.name, client))
                    except Exception as exc:
                        logger.warning("MCP server %s: re-listing its tools failed: %s", self.name, describe(exc))

            tg.start_soon(relist)
            tg.start_soon(self._listen, client)
            await self._ended.wait()
            tg.cancel_scope.cancel()

    async def _listen(self, client: Client) -> None:
        """A 2026-07-28 server announces a changed tool list only on a `subscriptions/listen` stream: hold one open
        while connected (a handshake-era server sends the notification unasked; `_on_message` takes that)."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self._relist.set()
        except ListenNotSupportedError:
            return
        except Exception as exc:  # a server without the stream still serves calls; refresh re-lists it by hand
            logger.info("MCP server %s: no subscriptions/listen stream (%s)", self.name, describe(exc))


def describe(exc: BaseException) -> str:
    """A failure in a sentence: the innermost cause of an exception group, its type when it says nothing."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"its command was not found ({exc.filename or exc})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
