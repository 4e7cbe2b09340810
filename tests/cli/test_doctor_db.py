"""`mcp-harness doctor`'s database checks: the backend and its version, migrations applied or pending, and on
PostgreSQL the sessions waiting for a lock."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mcp_harness.store.migrations import MIGRATIONS
from tests.cli.clikit import run
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)


def _checks(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict[str, Any]]:
    _, out, _ = run(capsys, "doctor", "--json", *argv)
    return {c["check"]: c for c in json.loads(out)["checks"]}


def test_doctor_names_the_sqlite_store_and_its_migrations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    fresh = _checks(capsys, "--data-dir", str(data))
    assert fresh["database"]["ok"] is True and str(data / "harness.db") in fresh["database"]["detail"]
    assert fresh["migrations"]["ok"] is None and "created and migrated on first use" in fresh["migrations"]["detail"]
    assert not data.exists()  # doctor creates nothing
    assert run(capsys, "migrate", "--data-dir", str(data))[0] == 0
    migrated = _checks(capsys, "--data-dir", str(data))
    assert migrated["migrations"] == {
        "check": "migrations",
        "ok": True,
        "detail": f"{len(MIGRATIONS)} applied; up to date",
    }


def test_doctor_checks_postgresql_version_migrations_and_lock_waits(
    tmp_path: Path, pg_cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_cluster.new_database(migrated=True)
    config = tmp_path / "config.toml"
    config.write_text(f"[store]\nurl = {json.dumps(url)}\n")
    argv = ("--config", str(config), "--data-dir", str(tmp_path / "data"))
    checks = _checks(capsys, *argv)
    assert checks["database"]["ok"] is True and checks["database"]["detail"].startswith("PostgreSQL 1")
    assert checks["migrations"]["ok"] is True
    assert checks["lock waits"] == {"check": "lock waits", "ok": True, "detail": "no session is waiting for a lock"}

    with psycopg.connect(url, autocommit=True) as holder, psycopg.connect(url, autocommit=True) as waiter:
        holder.execute("SELECT pg_advisory_lock(42)")
        blocked = threading.Thread(target=lambda: waiter.execute("SELECT pg_advisory_lock(42)"))
        blocked.start()
        try:
            while True:  # until the second session is queued on the lock
                row = holder.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
                if row is not None and row[0] > 0:
                    break
            waiting = _checks(capsys, *argv)["lock waits"]
        finally:
            holder.execute("SELECT pg_advisory_unlock(42)")
            blocked.join()
    assert waiting["ok"] is None and waiting["detail"].startswith("1 waiting for a lock, the longest for ")
