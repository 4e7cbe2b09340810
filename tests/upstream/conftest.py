"""What the upstream suite shares: the reference servers' entry points, a harness mounting servers, and a client."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server

NODE_MODULES = Path(__file__).resolve().parents[1] / "js" / "node_modules" / "@modelcontextprotocol"
FILESYSTEM = NODE_MODULES / "server-filesystem" / "dist" / "index.js"
MEMORY = NODE_MODULES / "server-memory" / "dist" / "index.js"
EVERYTHING = NODE_MODULES / "server-everything" / "dist" / "index.js"
FIXTURE = Path(__file__).with_name("fixture_server.py")


def fixture_command(marks: Path) -> list[str]:
    return [sys.executable, str(FIXTURE), str(marks)]


def mounting(tmp_path: Path, servers: list[dict[str, Any]], **overrides: Any) -> Harness:
    """A harness over a fresh data dir with these `[[mcp.servers]]`."""
    return Harness(load_settings(data_dir=tmp_path / "data", mcp={"servers": servers}, **overrides))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-wide, so one harness (and its upstream processes, a second or two to start each) serves a module."""
    return "asyncio"


@pytest.fixture(scope="module")
def marks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("marks")


@pytest.fixture(scope="module")
def fixture_harness(tmp_path_factory: pytest.TempPathFactory, marks: Path) -> Iterator[Harness]:
    """A harness mounting the Python fixture server as `fx` (a 2026-07-28 era server over stdio), for the module."""
    home = tmp_path_factory.mktemp("fx")
    h = mounting(home, [{"name": "fx", "command": fixture_command(marks), "timeout_s": 20}])
    yield h
    h.close()


@pytest.fixture(scope="module")
async def fx_client(fixture_harness: Harness) -> AsyncIterator[Client]:
    """Our server over the fixture harness, one handshake-era session for the module."""
    async with Client(build_server(fixture_harness), mode="legacy") as c:
        yield c
