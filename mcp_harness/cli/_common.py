"""Helpers every command group shares: the common flags, settings, an opened harness, exit codes and output."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_harness.config import Settings, load_settings
from mcp_harness.errors import HarnessError

if TYPE_CHECKING:
    from mcp_harness.harness import Harness

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_BROKEN_PIPE = 141
EXIT_CODES_HELP = """exit codes:
  0    success
  1    failure: the operation could not be done (storage, a remote service, a failed doctor check, or the
       verb `invoke` ran answered with an error, which is logged in the thread)
  2    usage: a bad flag, argument, config value or input (the message says what is accepted)
  3    not found: the agent, session, provider, secret or identity named does not exist
  4    refused: a conflict with what exists (a duplicate name, a provider in use, a file present) or no grant
  141  stdout was closed early (e.g. `| head -1`); nothing is reported
"""


def exit_code(error: HarnessError) -> int:
    """The documented exit code of a refusal, from its HTTP-style status."""
    if error.status == 404:
        return EXIT_NOT_FOUND
    if error.status in (403, 409):
        return EXIT_REFUSED
    if error.status in (400, 413):
        return EXIT_USAGE
    return EXIT_FAILURE


def common_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="data directory (default: per-user; env MCP_HARNESS_DATA_DIR)")
    parser.add_argument(
        "--config",
        type=Path,
        help="TOML config file (env MCP_HARNESS_CONFIG; default: `mcp-harness config path`, if it exists)",
    )


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON: an array for lists, an object otherwise")


def command_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of every command but `serve`: data dir, config and --json."""
    common_flags(parser)
    json_flag(parser)


def settings_of(args: argparse.Namespace) -> Settings:
    return load_settings(args.config, data_dir=args.data_dir)


@contextmanager
def opened(args: argparse.Namespace) -> Iterator[Harness]:
    """The harness over the data dir the flags name, closed afterwards."""
    from mcp_harness.harness import Harness

    harness = Harness(settings_of(args))
    try:
        yield harness
    finally:
        harness.close()


def emit(out: Any, args: argparse.Namespace, data: Any, text: str | None) -> int:
    """Print `data` as one JSON document with --json, else `text` (when there is any). Returns 0."""
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, ensure_ascii=False), file=out)
    elif text is not None:
        print(text, file=out)
    return EXIT_OK


def plural(count: int, word: str, words: str | None = None) -> str:
    """`1 step`, `2 steps`."""
    return f"{count} {word if count == 1 else words or word + 's'}"


def article(word: str) -> str:
    """`an openai`, `a custom`: the indefinite article a word takes when read aloud."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def fmt_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
