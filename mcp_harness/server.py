"""The MCP front: binds each request to (agent, session), lists the verbs, maps results and refusals to the wire.

This module and `resources/` are the only ones that know MCP. Binding rules (DESIGN §3):
- no HTTP request (stdio, in-process): the server's own binding — a new session created on the first verb call,
  or the session named by `--session`;
- `/mcp/sessions/{id}`: that session, in both protocol eras;
- `/mcp`, handshake era: one harness session per MCP session id;
- `/mcp`, 2026-07-28 stateless era: the agent's standing session.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_harness import __version__
from mcp_harness.config import HttpSettings, TokenSettings, token_hash
from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.harness import LOCAL_ACCOUNT, Harness, SessionBinding
from mcp_harness.resources import RESOURCE_TEMPLATES, list_resources, read_resource
from mcp_harness.tools.base import Progress
from mcp_harness.tools.catalog import callable_spec, promoted_callables
from mcp_harness.tools.contracts import RETURN_RESULT_DESCRIPTION, VERBS, VerbSpec

logger = logging.getLogger(__name__)

_SESSION_PATH = re.compile(r"^/mcp/sessions/([^/]+)/?$")
MAX_TRACKED_HTTP_SESSIONS = 10_000
INSTRUCTIONS = (
    "mcp-harness gives you five verbs. read and write reach addresses: ~/memory/<path> is your persistent memory, "
    "~/self describes you, ~/tools/ lists what you can do, thread: lists conversations. plan keeps a visible "
    "checklist. Read ~/tools/<verb> for any verb's full contract."
)


def _tool(spec: VerbSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=spec.open_world,
        ),
    )


VERB_TOOLS = [_tool(spec) for spec in VERBS.values()]


def error_result(error: HarnessError) -> types.CallToolResult:
    """A refusal as the model sees it: `isError`, the message, and `structuredContent.error`."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error.message)],
        structured_content={"error": error.to_dict()},
        is_error=True,
    )


@dataclass
class ServerState:
    """Per-process state of the MCP front: the harness and the bindings it has handed out."""

    harness: Harness
    agent_name: str | None
    default: SessionBinding
    by_mcp_session: OrderedDict[tuple[str, str | None], SessionBinding] = field(default_factory=lambda: OrderedDict())
    by_path: OrderedDict[tuple[str, str | None], SessionBinding] = field(default_factory=lambda: OrderedDict())
    standing: dict[str | None, SessionBinding] = field(default_factory=lambda: {})

    def _agent_id(self, agent_name: str | None) -> str:
        return self.harness.agent(agent_name).id

    async def promoted(self, binding: SessionBinding) -> dict[str, VerbSpec]:
        """Callables this binding's session has touched, as contracts; only on session-bound endpoints (DESIGN §3)."""
        if binding.kind == "standing" or binding.session_id is None:
            return {}

        def compute() -> dict[str, VerbSpec]:
            ctx = binding.context_sync(create=False)
            assert ctx.session_id is not None
            names = promoted_callables(self.harness, ctx.agent, ctx.session_id)
            return {name: callable_spec(self.harness, name) for name in names}

        return await anyio.to_thread.run_sync(compute)

    async def announce_promotions(self, ctx: ServerRequestContext[ServerState], binding: SessionBinding) -> None:
        """Tell a handshake-era client its tool list grew (`notifications/tools/list_changed`)."""
        now = await self.promoted(binding)
        if binding.promoted is not None and set(now) == set(binding.promoted):
            return
        if binding.promoted is None and not now:
            return
        binding.promoted = now
        try:
            await ctx.session.send_tool_list_changed()
        except Exception:  # a client that hung up mid-call must not turn a finished call into an error
            logger.info("could not send tools/list_changed", exc_info=True)

    def binding_for(self, ctx: ServerRequestContext[Any, Any]) -> SessionBinding:
        request = ctx.request
        url = getattr(request, "url", None)
        if url is None:
            return self.default
        scope: dict[str, Any] = getattr(request, "scope", {})
        token: TokenSettings | None = scope.get(TOKEN_SCOPE_KEY)
        # A token names the agent its requests act as; without one (loopback, no tokens) the server's agent.
        agent_name = token.agent if token is not None and token.agent else self.agent_name
        match = _SESSION_PATH.match(url.path)
        if match:
            session_id = match.group(1)
            required = token.agent if token is not None else None
            return self._remember(
                self.by_path,
                (session_id, required),
                lambda: SessionBinding(self.harness, agent_id="", session_id=session_id, required_agent=required),
            )
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            found = self.standing.get(agent_name)
            if found is None:
                found = self.standing[agent_name] = SessionBinding(
                    self.harness, agent_id=self._agent_id(agent_name), kind="standing"
                )
            return found
        mcp_session = request.headers.get("mcp-session-id", "") if request is not None else ""  # pyright: ignore
        title = f"HTTP session {datetime.now(UTC):%Y-%m-%d %H:%M}"
        return self._remember(
            self.by_mcp_session,
            (mcp_session, agent_name),
            lambda: SessionBinding(self.harness, agent_id=self._agent_id(agent_name), title=title),
        )

    @staticmethod
    def _remember(
        table: OrderedDict[tuple[str, str | None], SessionBinding],
        key: tuple[str, str | None],
        make: Callable[[], SessionBinding],
    ) -> SessionBinding:
        found = table.get(key)
        if found is None:
            found = table[key] = make()
            while len(table) > MAX_TRACKED_HTTP_SESSIONS:
                table.popitem(last=False)
        return found


async def _deliver_result(
    harness: Harness, binding: SessionBinding, schema: dict[str, Any], payload: dict[str, Any]
) -> types.CallToolResult:
    """An outside client (or agent framework) working a delegated child delivers its typed result."""
    from mcp_harness.runs.deliver import deliver_typed_result

    assert binding.session_id is not None
    result, error = await deliver_typed_result(harness, binding.session_id, schema, payload)
    if error is not None:
        return error_result(error)
    assert result is not None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.text)], structured_content=result.data
    )


def _may_promote(verb: str, arguments: dict[str, Any]) -> bool:
    """Only `call` and `read ~/tools/<name>` can touch a callable, so only they can change the promoted set."""
    if verb == "call":
        return True
    address = arguments.get("address")
    return verb == "read" and isinstance(address, str) and address.strip().startswith("~/tools/")


def _progress_reporter(ctx: ServerRequestContext[ServerState]) -> Progress:
    """Status lines as `notifications/progress` (a no-op when the request carries no progress token)."""
    count = 0

    async def report(message: str) -> None:
        nonlocal count
        count += 1
        await ctx.session.report_progress(count, message=message)

    return report


def _return_result_tool(schema: dict[str, Any]) -> types.Tool:
    return types.Tool(
        name="return_result",
        title="Return result",
        description=RETURN_RESULT_DESCRIPTION,
        input_schema=schema,
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    )


def build_server(
    harness: Harness, *, agent_name: str | None = None, session_id: str | None = None
) -> Server[ServerState]:
    """The MCP server over `harness`. `session_id` binds stdio/in-process calls to an existing session."""
    agent = harness.agent(agent_name)
    if session_id is not None:
        harness.sessions.get(session_id)
    title = f"MCP session {datetime.now(UTC):%Y-%m-%d %H:%M}"
    state = ServerState(
        harness=harness,
        agent_name=agent_name,
        default=SessionBinding(harness, agent_id=agent.id, session_id=session_id, title=title),
    )

    @asynccontextmanager
    async def lifespan(_: Server[ServerState]) -> AsyncIterator[ServerState]:
        async with harness.engine_running():
            yield state

    async def on_list_tools(
        ctx: ServerRequestContext[ServerState], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        binding = state.binding_for(ctx)
        tools = list(VERB_TOOLS)
        promoted = await state.promoted(binding)
        binding.promoted = promoted
        tools += [_tool(spec) for spec in promoted.values()]
        owed = await binding.owed_output_schema()
        if owed is not None:
            tools.append(_return_result_tool(owed))
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[ServerState], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        binding = state.binding_for(ctx)
        name = params.name
        arguments = params.arguments or {}
        if name == "return_result":
            owed = await binding.owed_output_schema()
            if owed is not None:
                return await _deliver_result(state.harness, binding, owed, arguments)
        if name in VERBS:
            verb, verb_input = name, arguments
        elif name in await state.promoted(binding):
            # A promoted callable is a shortcut for `call`: same validation, same log, same promotion.
            verb, verb_input = "call", {"tool": name, "input": arguments}
        else:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {name!r}. Tools: {', '.join(VERBS)}.")
        result, error = await binding.invoke(verb, verb_input, progress=_progress_reporter(ctx))
        if _may_promote(verb, verb_input) and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            await state.announce_promotions(ctx, binding)
        if error is not None:
            return error_result(error)
        assert result is not None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)], structured_content=result.data
        )

    async def on_list_resources(
        ctx: ServerRequestContext[ServerState], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await list_resources(state.binding_for(ctx), params.cursor if params else None)

    async def on_list_resource_templates(
        ctx: ServerRequestContext[ServerState], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=RESOURCE_TEMPLATES)

    async def on_read_resource(
        ctx: ServerRequestContext[ServerState], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await read_resource(state.binding_for(ctx), params.uri)

    return Server(
        "mcp-harness",
        version=__version__,
        title="mcp-harness",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
    )


__all__ = ["BadRequest", "ServerState", "build_server", "error_result"]


# -- transports ----------------------------------------------------------------------------------------------


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over stdin/stdout until it disconnects.

    When both ends are pipes or sockets (how every MCP client spawns a server), the wire is read and written with
    non-blocking descriptors on the event loop. The SDK's `stdio_server` instead hops to a worker thread for every
    line read, every write and every flush, three hops per call that cost more than a whole memory read; the
    harness spends its one hop on the verb. Terminals, regular files and Windows keep the SDK transport.
    """
    if _pipe_like(0) and _pipe_like(1):
        async with _pipe_stdio() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _pipe_like(fd: int) -> bool:
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def _pipe_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """Newline-delimited JSON-RPC over fds 0 and 1, as the SDK frames it, without worker threads.

    Like the SDK, the wire moves to private descriptors while serving, and fd 0 / fd 1 point at /dev/null and
    stderr, so a stray print (or a child process inheriting stdio) can never corrupt the protocol stream.
    """
    import fcntl

    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    os.set_blocking(wire_in, False)
    os.set_blocking(wire_out, False)
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def deliver(line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:  # the SDK's session answers a malformed line with a parse error
            await inbound_send.send(exc)
            return
        await inbound_send.send(SessionMessage(message))

    async def read_wire() -> None:
        buffer = bytearray()
        async with inbound_send:
            while True:
                await anyio.wait_readable(wire_in)
                try:
                    chunk = os.read(wire_in, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                scan_from = len(buffer)
                buffer += chunk
                start = 0
                while (end := buffer.find(b"\n", scan_from)) >= 0:
                    await deliver(bytes(buffer[start:end]))
                    start = scan_from = end + 1
                del buffer[:start]
            await deliver(bytes(buffer))

    drained = anyio.Event()

    async def write_wire() -> None:
        async with outbound_receive:
            async for session_message in outbound_receive:
                json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                pending = memoryview((json + "\n").encode())
                while pending:
                    try:
                        pending = pending[os.write(wire_out, pending) :]
                    except BlockingIOError:
                        await anyio.wait_writable(wire_out)
        drained.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_wire)
            tg.start_soon(write_wire)
            try:
                yield inbound, outbound
            finally:
                await outbound.aclose()
                # Let queued replies drain, but never hang on a client that stopped reading.
                with anyio.move_on_after(5):
                    await drained.wait()
                tg.cancel_scope.cancel()
    except* BrokenPipeError:
        logger.info("the client closed stdout; stopping")
    finally:
        # Anything printed while serving still sits in sys.stdout's buffer; it belongs on stderr, not the wire.
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        for fd in (wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


def _is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


TOKEN_SCOPE_KEY = "mcp_harness.token"
"""Where the HTTP guard leaves the matched token for `binding_for`."""
_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def _origin_allowed(origin: str, allowed: list[str]) -> bool:
    for pattern in allowed:
        if origin == pattern or (pattern.endswith(":*") and origin.startswith(pattern[:-1])):
            return True
    return False


def http_app(server: Server[ServerState], *, host: str, http: HttpSettings) -> Any:
    """A Starlette app serving `/mcp` and `/mcp/sessions/{id}` through one session manager.

    Every request passes the guard first: a browser `Origin` must be a loopback one or configured, and when tokens
    are configured the bearer token must hash to one of them (tokens are stored only as hashes). A non-loopback bind
    without tokens is refused outright.
    """
    import hmac

    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    loopback = _is_loopback(host)
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
    # The SDK checks Host (DNS rebinding) and Origin; off loopback, Host is only checked when hosts are configured,
    # since the names clients use for a public bind are not knowable here. Origin is always checked below.
    check_hosts = loopback or bool(http.allowed_hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=check_hosts,
        allowed_hosts=[*_LOOPBACK_HOSTS, *([f"{host}:*", host] if not loopback else []), *http.allowed_hosts],
        allowed_origins=[*_LOOPBACK_ORIGINS, *http.allowed_origins],
    )
    origins = [*_LOOPBACK_ORIGINS, *http.allowed_origins]
    manager = StreamableHTTPSessionManager(
        app=server, security_settings=security, max_request_body_size=http.max_body_bytes
    )
    mcp_asgi = StreamableHTTPASGIApp(manager)
    hashes = [(t, t.hash) for t in http.tokens]

    class Endpoint:
        """A raw ASGI endpoint (a class, so Starlette routes every method to it rather than only GET)."""

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await guarded(scope, receive, send)

    async def refuse(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
        await JSONResponse({"error": message}, status_code=status, headers=headers)(scope, receive, send)

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        origin = headers.get(b"origin", b"").decode("latin-1")
        if origin and not _origin_allowed(origin, origins):
            await refuse(scope, receive, send, 403, f"Origin {origin} is not allowed (see [http] allowed_origins).")
            return
        if hashes:
            header = headers.get(b"authorization", b"").decode("latin-1")
            presented = header[7:].strip() if header.lower().startswith("bearer ") else ""
            digest = token_hash(presented) if presented else ""
            matched = next((t for t, h in hashes if hmac.compare_digest(digest, h)), None)
            if matched is None:
                await refuse(scope, receive, send, 401, "A valid bearer token is required.")
                return
            scope[TOKEN_SCOPE_KEY] = matched
        await mcp_asgi(scope, receive, send)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    endpoint = Endpoint()
    routes = [Route("/mcp", endpoint=endpoint), Route("/mcp/sessions/{session_id}", endpoint=endpoint)]
    return Starlette(routes=routes, lifespan=lifespan)


async def serve_http(
    server: Server[ServerState], *, harness: Harness, host: str, port: int, http: HttpSettings
) -> None:
    """Serve Streamable HTTP until interrupted."""
    import uvicorn

    app = http_app(server, host=host, http=http)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    async with harness.engine_running():  # one engine for every HTTP session
        await uvicorn.Server(config).serve()
