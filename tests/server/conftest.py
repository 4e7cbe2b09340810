"""What the server suites share: a harness served over Streamable HTTP on loopback, without tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_harness.config import HttpSettings, load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from tests.conftest import serving


@pytest.fixture
async def http_server(tmp_path: Path) -> AsyncIterator[tuple[str, Harness]]:
    """(base URL, harness): a fresh harness over tmp_path behind `http_app` (1 MiB bodies), closed after the test."""
    harness = Harness(load_settings(data_dir=tmp_path))
    app = http_app(build_server(harness), host="127.0.0.1", http=HttpSettings(max_body_bytes=1 << 20))
    async with serving(app) as base:
        yield base, harness
    harness.close()
