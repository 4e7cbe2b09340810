"""Transports: stdio (threadless on pipes, the SDK's elsewhere) and Streamable HTTP with its guard."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from mcp_harness.config import HttpSettings, token_hash
from mcp_harness.errors import BadRequest
from mcp_harness.harness import LOCAL_ACCOUNT, Harness

logger = logging.getLogger(__name__)


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over stdin/stdout until it disconnects.

    When both ends are pipes or sockets (how every MCP client spawns a server), the wire is read and written with
    non-blocking descriptors on the event loop. The SDK's `stdio_server` instead hops to a worker thread for every
    line read, every write and every flush, three hops per call that cost more than a whole memory read; the
    harness spends its one hop on the verb. Regular files (`serve < requests.jsonl`) are read the same way, on a
    worker thread. Terminals and Windows keep the SDK transport.
    """
    if _pipe_like(0) and _pipe_like(1):
        async with _pipe_stdio() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _pipe_like(fd: int) -> bool:
    """A pipe, socket or regular file: something the threadless transport can serve (never a terminal)."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISREG(mode)


# After end of input, how long replies to requests already received may take before the transport closes.
EOF_GRACE_S = 60.0


@asynccontextmanager
async def _pipe_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """Newline-delimited JSON-RPC over fds 0 and 1, as the SDK frames it, without worker threads.

    Like the SDK, the wire moves to private descriptors while serving, and fd 0 / fd 1 point at /dev/null and
    stderr, so a stray print (or a child process inheriting stdio) can never corrupt the protocol stream.
    """
    import fcntl

    input_is_file = stat.S_ISREG(os.fstat(0).st_mode)  # files cannot be polled: read them on a worker thread
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

    # Requests still owed a reply: at end of input the session stays open until they are answered, so
    # `serve < requests.jsonl` (or a client that closes stdin right after its last request) gets every reply.
    owed: set[Any] = set()
    answered = anyio.Event()

    async def deliver(line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:  # the SDK's session answers a malformed line with a parse error
            await inbound_send.send(exc)
            return
        if isinstance(message, types.JSONRPCRequest):
            owed.add(message.id)
        await inbound_send.send(SessionMessage(message))

    async def read_chunk() -> bytes | None:
        if input_is_file:
            return await anyio.to_thread.run_sync(os.read, wire_in, 1 << 16)
        await anyio.wait_readable(wire_in)
        try:
            return os.read(wire_in, 1 << 16)
        except BlockingIOError:
            return None

    async def read_wire() -> None:
        nonlocal answered
        buffer = bytearray()
        async with inbound_send:
            while True:
                chunk = await read_chunk()
                if chunk is None:
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
            with anyio.move_on_after(EOF_GRACE_S):
                while owed:
                    answered = anyio.Event()
                    await answered.wait()

    drained = anyio.Event()

    async def write_wire() -> None:
        async with outbound_receive:
            async for session_message in outbound_receive:
                message = session_message.message
                if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    owed.discard(message.id)
                    answered.set()
                json = message.model_dump_json(by_alias=True, exclude_unset=True)
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


def http_app(server: Server[Any], *, host: str, http: HttpSettings) -> Any:
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


async def serve_http(server: Server[Any], *, harness: Harness, host: str, port: int, http: HttpSettings) -> None:
    """Serve Streamable HTTP until interrupted."""
    import uvicorn

    app = http_app(server, host=host, http=http)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    async with harness.engine_running():  # one engine for every HTTP session
        await uvicorn.Server(config).serve()
