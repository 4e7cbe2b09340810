"""The trigger suites run on both backends (issue 21): every harness a test opens takes its store from
`MCP_HARNESS_STORE_URL`, unset for SQLite and a fresh migrated PostgreSQL database of the session's cluster for the
other run (tests/store/pgkit.py)."""

from __future__ import annotations

import pytest

from tests.store.pgkit import cluster


@pytest.fixture(autouse=True, params=["sqlite", "postgres"])
def store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "postgres":
        monkeypatch.setenv("MCP_HARNESS_STORE_URL", cluster(request).new_database(migrated=True))
    else:
        monkeypatch.delenv("MCP_HARNESS_STORE_URL", raising=False)
    return str(request.param)
