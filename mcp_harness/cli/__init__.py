"""The `mcp-harness` command: one module per command group, each registering its parsers and handler.

Only these modules print; `serve` never writes to stdout, which belongs to the JSON-RPC stream on stdio.
"""

from __future__ import annotations

import argparse
import logging
import sys

from mcp_harness import __version__
from mcp_harness.cli import agents, doctor, identity, invoke, provider, secret, serve, token
from mcp_harness.errors import HarnessError

GROUPS = (serve, agents, invoke, token, provider, secret, identity, doctor)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-harness", description="An agent harness as an MCP server: five verbs.")
    parser.add_argument("--version", action="version", version=f"mcp-harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `mcp-harness` console script."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args, sys.stdout)
    except HarnessError as exc:
        print(f"mcp-harness: {exc.message}", file=sys.stderr)
        return 2
