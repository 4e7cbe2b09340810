"""`mcp-harness serve`: stdio by default, Streamable HTTP with `--http`. Never prints to stdout.

Whatever stops the server from starting is one line on stderr before any banner, never a traceback: exit 2 for a
usage error (a malformed `--http`, an invalid config, a public bind without tokens), 1 for everything else (an
unusable data directory, a host that does not resolve, a port in use, an address that is not local).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_harness import __version__
from mcp_harness.cli._common import common_flags
from mcp_harness.config import DEFAULT_HTTP, Settings, load_settings
from mcp_harness.errors import BadRequest, StorageError

if TYPE_CHECKING:
    from mcp_harness.harness import Harness


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="serve MCP over stdio (default) or Streamable HTTP")
    serve.set_defaults(handler=_serve_command)
    common_flags(serve)
    serve.add_argument(
        "--http",
        nargs="?",
        const="",
        metavar="HOST:PORT",
        help=f"serve Streamable HTTP (default: [http] listen, else {DEFAULT_HTTP})",
    )
    serve.add_argument("--agent", help="agent name or id (default: the configured agent)")
    serve.add_argument("--session", help="bind stdio to this existing session id")


def _listen_address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise BadRequest(f"--http takes HOST:PORT, like {DEFAULT_HTTP}; got {listen!r}.")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _check_data_dir(path: Path) -> None:
    """Create the data directory (private to its owner) or say in one line why it cannot be used."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise StorageError(f"The data directory {path} is a file; pick another --data-dir.") from None
    except NotADirectoryError:
        raise StorageError(f"The data directory {path} lies under a file; pick another --data-dir.") from None
    except OSError as exc:
        raise StorageError(f"Cannot create the data directory {path}: {exc.strerror}.") from None
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise StorageError(f"The data directory {path} is not writable by this user; pick another --data-dir.")


def _open_harness(settings: Settings) -> Harness:
    from mcp_harness.harness import Harness

    _check_data_dir(settings.data_dir)
    try:
        return Harness(settings)
    except OSError as exc:
        where = exc.filename or settings.data_dir
        raise StorageError(f"Cannot use the data directory {settings.data_dir} ({where}: {exc.strerror}).") from None


def _serve_command(args: argparse.Namespace, out: Any) -> int:
    import anyio

    from mcp_harness.harness import ENGINE_AFTER_S
    from mcp_harness.server import build_server, serve_stdio
    from mcp_harness.server.process import tune_after_startup

    settings = load_settings(args.config, data_dir=args.data_dir)
    logging.getLogger().setLevel(settings.log_level.upper())
    address = _listen_address(args.http or settings.http.listen) if args.http is not None else None
    harness = _open_harness(settings)
    try:
        after = ENGINE_AFTER_S if address is None else 0.0  # over stdio the client waits on the handshake
        server = build_server(harness, agent_name=args.agent, session_id=args.session, engine_after_s=after)
        tune_after_startup()
        if address is None:
            anyio.run(serve_stdio, server, server.wire_calls)
            return 0
        _serve_http(harness, server, settings, *address)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        harness.close()


def _serve_http(harness: Harness, server: Any, settings: Settings, host: str, port: int) -> None:
    import anyio

    from mcp_harness.server.transports import http_app, listen_http, serve_http, session_visibility

    listener = listen_http(host, port)
    app = http_app(
        server,
        host=host,
        http=settings.http,
        loopback=listener.loopback,
        session_visible=session_visibility(harness),
        console=harness,
        hooks=harness,
        attachments=harness,
        ipfs=harness,
        health=harness,
    )
    listener.open()
    try:
        tokens = settings.http.tokens
        auth = f"{len(tokens)} bearer token(s)" if tokens else "no tokens (loopback only)"
        print(
            f"mcp-harness {__version__} serving Streamable HTTP at {listener.url} — {auth}; data: {settings.data_dir}",
            file=sys.stderr,
        )

        async def run() -> None:
            await serve_http(app, harness=harness, listener=listener)

        anyio.run(run)
    finally:
        listener.close()
