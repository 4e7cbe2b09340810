"""A throw-away PostgreSQL cluster for the store suites that run on both backends (docs/postgres.md).

One cluster per test session, started on first use: `initdb` in a temp dir (as a non-root user when the tests run as
root — initdb refuses root), listening on a Unix socket only, fsync off (nothing here must survive a crash of the
machine). Test modules import the fixtures `any_db_fixture` (as `any_db`: each backend in turn),
`store_backend_fixture` (as `store_backend`: each backend for the harnesses a test opens) and `pg_cluster_fixture`
(as `pg_cluster`). Every test gets a fresh database cloned from a migrated template, which costs one `CREATE
DATABASE` instead of twenty migrations. The cluster stops and its directory goes when the session ends.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from mcp_harness.store.db import Database
from mcp_harness.store.pg import PgDatabase
from mcp_harness.store.port import Store

SUPERUSER = "postgres"


@dataclass
class Cluster:
    root: Path
    bindir: Path
    run_as: str | None
    _names: itertools.count[int]
    _template: str | None = None

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{dbname}?host={self.socket_dir}"

    def new_database(self, *, migrated: bool = False) -> str:
        """A fresh, empty database's URL (migrated to the current schema when asked)."""
        name = f"t{next(self._names)}"
        template = self._migrated_template() if migrated else "template0"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
            )
        return self.url(name)

    def _migrated_template(self) -> str:
        if self._template is None:
            with psycopg.connect(self.url(), autocommit=True) as conn:
                conn.execute('CREATE DATABASE "harness_template" TEMPLATE template0')
            PgDatabase(self.url("harness_template"), pool_size=1).close()
            self._template = "harness_template"
        return self._template

    def stop(self) -> None:
        self._pg("pg_ctl", "stop", "-D", str(self.root / "data"), "-m", "immediate", "-w")
        shutil.rmtree(self.root, ignore_errors=True)

    def _pg(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.run_as is not None:
            command = ["runuser", "-u", self.run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()} {tail}")


def find_bindir() -> Path:
    """The directory of `initdb` and `pg_ctl`: PATH (Debian links only some tools), else Debian's versioned dirs."""
    for tool in ("initdb", "pg_ctl"):
        found = shutil.which(tool)
        if found and (Path(found).resolve().parent / "initdb").exists():
            return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if versions:
        return versions[-1].parent
    raise RuntimeError("PostgreSQL is not installed (no initdb): `apt-get install postgresql` (.ci/run does).")


def start(run_as: str = "nobody") -> Cluster:
    """Start a cluster; as `run_as` when this process is root."""
    user = run_as if os.geteuid() == 0 else None
    # As root, under /tmp: the non-root user must reach the directory, which a root-only TMPDIR would hide.
    root = Path(tempfile.mkdtemp(prefix="mcp-harness-pg-", dir="/tmp" if user is not None else None))
    cluster = Cluster(root, find_bindir(), user, itertools.count(1))
    (root / "sock").mkdir()
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (root, root / "sock"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    data = str(root / "data")
    cluster._pg("initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "--no-locale", "-E", "UTF8", "--no-sync")
    options = f"-k {root / 'sock'} -c listen_addresses='' -F -c full_page_writes=off -c max_connections=60"
    cluster._pg("pg_ctl", "start", "-D", data, "-w", "-l", str(root / "log"), "-o", options)
    return cluster


_CLUSTER: Cluster | None = None


def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The session's cluster (started on first call; stopped when the session ends)."""
    global _CLUSTER
    if _CLUSTER is None:
        _CLUSTER = start()
        request.config.add_cleanup(_stop)
    return _CLUSTER


def _stop() -> None:
    global _CLUSTER
    if _CLUSTER is not None:
        _CLUSTER.stop()
        _CLUSTER = None


@pytest.fixture(scope="session", name="pg_cluster")
def pg_cluster_fixture(request: pytest.FixtureRequest) -> Cluster:
    return cluster(request)


@pytest.fixture(params=["sqlite", "postgres"], name="store_backend")
def store_backend_fixture(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each backend in turn for every harness the test opens: `MCP_HARNESS_STORE_URL` unset for SQLite, a fresh
    migrated database of the session's cluster for PostgreSQL. A suite takes it with `autouse` (an import and a
    fixture of its own that asks for it)."""
    if request.param == "postgres":
        monkeypatch.setenv("MCP_HARNESS_STORE_URL", cluster(request).new_database(migrated=True))
    else:
        monkeypatch.delenv("MCP_HARNESS_STORE_URL", raising=False)
    return str(request.param)


@pytest.fixture(params=["sqlite", "postgres"], name="any_db")
def any_db_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated database on each backend in turn, as the store port both meet."""
    db: Store
    if request.param == "sqlite":
        db = Database(tmp_path / "harness.db")
    else:
        db = PgDatabase(cluster(request).new_database(migrated=True), pool_size=4)
    try:
        yield db
    finally:
        db.close()
