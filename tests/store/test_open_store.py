"""`open_store`: the settings choose the backend, and a harness opened on PostgreSQL answers the verbs that are
ported (the rest of the stores move to PostgreSQL piece by piece, docs/postgres.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from mcp_harness.store.db import Database
from mcp_harness.store.migrations import MIGRATIONS
from mcp_harness.store.open import backend_of, open_store
from mcp_harness.store.pg import PgDatabase
from tests.conftest import call
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)


def test_the_sqlite_file_unless_a_url_names_postgresql(tmp_path: Path, pg_cluster: Cluster) -> None:
    sqlite = open_store(load_settings(None, data_dir=tmp_path / "data"))
    try:
        assert isinstance(sqlite, Database) and sqlite.path == tmp_path / "data" / "harness.db"
        assert backend_of(sqlite) == "sqlite"
    finally:
        sqlite.close()
    url = pg_cluster.new_database()  # empty: opening it migrates it
    pg = open_store(load_settings(None, data_dir=tmp_path / "data", **{"store.url": url}))
    try:
        assert isinstance(pg, PgDatabase) and pg.url == url and backend_of(pg) == "postgresql"
        with pg.reading() as conn:
            row = conn.execute("SELECT count(*) FROM _harness_migrations").fetchone()
        assert row is not None and row[0] == len(MIGRATIONS)
    finally:
        pg.close()


def test_mcp_harness_store_url_names_the_store_as_the_setting_does(
    tmp_path: Path, pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_cluster.new_database(migrated=True)
    monkeypatch.setenv("MCP_HARNESS_STORE_URL", url)
    harness = Harness(load_settings(None, data_dir=tmp_path / "data"))
    try:
        assert isinstance(harness.db, PgDatabase) and harness.db.url == url
    finally:
        harness.close()
    harness.close()  # a second close is a no-op on PostgreSQL too


@pytest.fixture
def pg_harness(tmp_path: Path, pg_cluster: Cluster) -> Iterator[Harness]:
    url = pg_cluster.new_database(migrated=True)
    harness = Harness(load_settings(None, data_dir=tmp_path / "data", **{"store.url": url}))
    yield harness
    harness.close()


@pytest.fixture
async def pg_client(pg_harness: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(pg_harness), mode="2026-07-28") as c:
        yield c


@pytest.mark.anyio
async def test_a_harness_on_postgresql_answers_memory_plan_and_listings(pg_client: Client, pg_harness: Harness) -> None:
    assert isinstance(pg_harness.db, PgDatabase)
    await call(pg_client, "write", {"address": "~/memory/notes.txt", "content": "on PostgreSQL"})
    assert (await call(pg_client, "read", {"address": "~/memory/notes.txt", "format": "json"}))["content"] == (
        "on PostgreSQL"
    )
    steps = [{"id": "s1", "label": "Port", "status": "running"}]
    await call(pg_client, "plan", {"title": "Fleet", "steps": steps})
    resource = (await pg_client.read_resource("harness://plan")).contents[0]
    assert isinstance(resource, types.TextResourceContents) and "# Fleet" in resource.text
    for listing in ("thread:", "~/memory/", "~/tools/", "~/triggers/", "~/self"):
        await call(pg_client, "read", {"address": listing, "format": "json"})
    sessions = pg_harness.sessions.list(pg_harness.account_id)
    assert len(sessions) == 1
    assert [(e.type, e.payload["name"]) for e in pg_harness.sessions.events(sessions[0].id)] == [
        ("tool_call", "write"),
        ("tool_result", "write"),
        ("tool_call", "read"),
        ("tool_result", "read"),
    ] + [(kind, "read") for _ in range(5) for kind in ("tool_call", "tool_result")]
