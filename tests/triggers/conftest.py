"""The trigger suites run on both backends (issue 21): every harness a test opens takes its store from
`MCP_HARNESS_STORE_URL`, unset for SQLite and a fresh migrated PostgreSQL database of the session's cluster for the
other run (tests/store/pgkit.py)."""

from __future__ import annotations

import pytest

from tests.store.pgkit import store_backend_fixture  # noqa: F401  (the store_backend fixture)


@pytest.fixture(autouse=True)
def both_backends(store_backend: str) -> str:
    return store_backend
