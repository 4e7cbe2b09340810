"""`GET /healthz`: 200 while the store answers and the engine beats, 503 naming which is wrong, with no token
needed and nothing else said."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from mcp_harness.config import HttpSettings, TokenSettings, load_settings, token_hash
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from mcp_harness.server import health as health_module
from mcp_harness.server.health import health
from tests.conftest import serving

pytestmark = pytest.mark.anyio


async def test_healthz_says_store_and_engine_in_two_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    http = HttpSettings(tokens=[TokenSettings(hash=token_hash("secret-token"))])  # /healthz needs none
    app = http_app(build_server(harness), host="127.0.0.1", http=http, health=harness)
    try:
        assert await health(harness) == (False, {"store": "ok", "engine": "stopped"})  # nothing serves yet
        async with serving(app) as base, httpx2.AsyncClient(base_url=base, timeout=30) as web:
            monkeypatch.setattr(health_module, "CACHE_S", 3600.0)
            alive = await web.get("/healthz")  # the app's lifespan runs the engine
            assert (alive.status_code, alive.json()) == (200, {"store": "ok", "engine": "alive"})
            assert alive.headers["cache-control"] == "no-store"
            assert (await web.get("/mcp")).status_code == 401  # the token guard still holds elsewhere
            with harness.db.transaction() as conn:  # the pump stopped beating ten minutes ago
                conn.execute(
                    "UPDATE instances SET heartbeat_at = heartbeat_at - 600000 WHERE id = ?", (harness.engine_owner,)
                )
            cached = await web.get("/healthz")  # within CACHE_S of the last check: its answer, no new read
            assert (cached.status_code, cached.json()) == (200, {"store": "ok", "engine": "alive"})
            monkeypatch.setattr(health_module, "CACHE_S", 0.0)
            stalled = await web.get("/healthz")
            assert (stalled.status_code, stalled.json()) == (503, {"store": "ok", "engine": "stalled"})
            harness.db.close()
            gone = await web.get("/healthz")
            assert (gone.status_code, gone.json()) == (503, {"store": "unreachable", "engine": "unknown"})
    finally:
        harness.close()
