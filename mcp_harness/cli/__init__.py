"""The `mcp-harness` command: one module per command group, each registering its parsers and handler.

Only these modules print; `serve` never writes to stdout, which belongs to the JSON-RPC stream on stdio.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from importlib import import_module

from mcp_harness import __version__
from mcp_harness.cli._common import EXIT_BROKEN_PIPE, EXIT_CODES_HELP, exit_code
from mcp_harness.errors import HarnessError

GROUPS = (
    "serve",
    "agents",
    "sessions",
    "runs",
    "chat",
    "attach",
    "invoke",
    "token",
    "provider",
    "secret",
    "mcp",
    "identity",
    "hm",
    "config",
    "doctor",
    "migrate",
    "gc",
)
"""The command groups, by module under `mcp_harness.cli`, in `--help` order. Imported by name: `serve` over stdio
is started once per conversation by a client, and importing every other group (models, threads, search…) only to
parse `serve`'s flags was most of what the harness added to the SDK's cold start."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or only group `only` (the one the arguments name: see `main`)."""
    parser = argparse.ArgumentParser(
        prog="mcp-harness",
        description="An agent harness as an MCP server: five verbs. Results go to stdout, messages to stderr; "
        "--json prints one JSON document (an array for lists, an object for one thing).",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcp-harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS if only is None else (only,):
        import_module(f"mcp_harness.cli.{group}").register(sub)
    return parser


def _silence_stdout() -> None:
    # The reader went away (`| head -1`): point fd 1 at /dev/null so the interpreter's final flush cannot raise
    # BrokenPipeError again and print a traceback on the way out.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout has no descriptor (captured in a test): nothing will flush to a closed pipe


def _serving(argv: list[str] | None) -> bool:
    """Whether the command is `serve` (its first word; no group takes options before it)."""
    words = sys.argv[1:] if argv is None else argv
    return bool(words) and words[0] == "serve"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `mcp-harness` console script; returns the exit code `mcp-harness --help` documents."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        args = build_parser("serve" if _serving(argv) else None).parse_args(argv)
        try:
            code = args.handler(args, sys.stdout)
        except HarnessError as exc:
            print(f"mcp-harness: {exc.message}", file=sys.stderr)
            return exit_code(exc)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return 130
