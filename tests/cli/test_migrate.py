"""`mcp-harness migrate`: applies what the store lacks and names it, then says "up to date"; `--status` changes
nothing and exits 1 while steps are pending; the same on SQLite and on PostgreSQL (`[store] url`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_harness.store.migrations import MIGRATIONS
from tests.cli.clikit import run
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)

NAMES = [fn.__name__ for fn in MIGRATIONS]


@pytest.fixture(params=["sqlite", "postgres"])
def flags(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The flags naming a fresh, empty store on each backend."""
    config = tmp_path / "config.toml"
    if request.param == "postgres":
        cluster: Cluster = request.getfixturevalue("pg_cluster")
        config.write_text(f"[store]\nurl = {json.dumps(cluster.new_database())}\n")
    else:
        config.write_text("")
    return ["--data-dir", str(tmp_path / "data"), "--config", str(config)]


def test_migrate_applies_the_pending_steps_once(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "migrate", "--status", "--json", *flags)
    status = json.loads(out)
    assert (code, status["applied"], status["pending"]) == (1, [], NAMES)
    assert status["backend"] in ("sqlite", "postgresql") and "password" not in status["store"]

    code, out, _ = run(capsys, "migrate", "--json", *flags)
    assert (code, json.loads(out)["applied"]) == (0, NAMES)

    code, out, _ = run(capsys, "migrate", *flags)
    assert code == 0 and out.endswith("is up to date.\n")
    code, out, _ = run(capsys, "migrate", "--status", *flags)
    assert code == 0 and out.endswith(f"{len(NAMES)} migrations applied; up to date.\n")


def test_an_unreachable_database_is_a_failure_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[store]\nurl = "postgresql://harness:secret@/nowhere?host=/nonexistent"\n')
    code, out, err = run(capsys, "migrate", "--config", str(config), "--data-dir", str(tmp_path / "data"))
    assert (code, out) == (1, "")
    assert "Cannot connect to the PostgreSQL database at postgresql://harness@/nowhere" in err
    assert "secret" not in err
