"""A whole harness on each backend in turn, for the suites of the SQL that lives outside `store/` (console pages,
completions, the CLI's run queries, the Hypermedia sync walks): `[store] url` set to a fresh migrated PostgreSQL
database of the session's cluster (tests/store/pgkit.py), or unset (the SQLite file in the data dir).

Modules import `any_harness_fixture` (as `any_harness`) or call `harness_on(request, tmp_path, backend)`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.config import Settings, load_settings
from mcp_harness.harness import Harness
from mcp_harness.store.pg import PgDatabase
from tests.store.pgkit import cluster

BACKENDS = ["sqlite", "postgres"]


def settings_on(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, rules: list[dict[str, Any]] | None = None
) -> Settings:
    """Settings over `tmp_path / "data"` whose `scripted` provider answers by `rules`, on `backend`'s store."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": rules or [{"turns": [{"text": "done"}]}]}))
    overrides: dict[str, Any] = {"providers": {"scripted": {"type": "scripted", "file": str(script)}}}
    if backend == "postgres":
        overrides["store.url"] = cluster(request).new_database(migrated=True)
    return load_settings(data_dir=tmp_path / "data", **overrides)


def harness_on(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str, rules: list[dict[str, Any]] | None = None
) -> Harness:
    harness = Harness(settings_on(request, tmp_path, backend, rules))
    assert isinstance(harness.db, PgDatabase) == (backend == "postgres")
    return harness


@pytest.fixture(params=BACKENDS, name="any_harness")
def any_harness_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """A harness (scripted provider answering "done") on SQLite, then on PostgreSQL."""
    harness = harness_on(request, tmp_path, request.param)
    try:
        yield harness
    finally:
        harness.close()
