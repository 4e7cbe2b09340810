"""`mcp-harness serve`: stdio by default, Streamable HTTP with `--http`. Never prints to stdout."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from mcp_harness import __version__
from mcp_harness.cli._common import common_flags
from mcp_harness.config import DEFAULT_HTTP, load_settings
from mcp_harness.errors import BadRequest


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


def _serve_command(args: argparse.Namespace, out: Any) -> int:
    import anyio

    from mcp_harness.harness import Harness
    from mcp_harness.server import build_server, serve_http, serve_stdio

    settings = load_settings(args.config, data_dir=args.data_dir)
    logging.getLogger().setLevel(settings.log_level.upper())
    harness = Harness(settings)
    try:
        server = build_server(harness, agent_name=args.agent, session_id=args.session)
        if args.http is None:
            anyio.run(serve_stdio, server)
            return 0
        listen = args.http or settings.http.listen
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            raise BadRequest(f"--http takes HOST:PORT, like {DEFAULT_HTTP}; got {listen!r}.")
        host = host.strip("[]")
        auth = f"{len(settings.http.tokens)} bearer token(s)" if settings.http.tokens else "no tokens (loopback only)"
        print(
            f"mcp-harness {__version__} serving Streamable HTTP at http://{listen}/mcp — {auth}; "
            f"data: {settings.data_dir}",
            file=sys.stderr,
        )

        async def run() -> None:
            await serve_http(server, harness=harness, host=host, port=int(port), http=settings.http)

        anyio.run(run)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        harness.close()
