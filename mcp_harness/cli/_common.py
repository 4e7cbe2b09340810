"""Helpers every command group shares: the common flags, settings, and an opened harness."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_harness.config import Settings, load_settings

if TYPE_CHECKING:
    from mcp_harness.harness import Harness


def common_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="data directory (default: per-user; env MCP_HARNESS_DATA_DIR)")
    parser.add_argument("--config", type=Path, help="TOML config file (env MCP_HARNESS_CONFIG)")


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


def fmt_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
