"""Which database the settings name: the SQLite file in the data dir, or PostgreSQL when `[store] url` is set.

The one place that chooses, so `serve`, the CLI and `gc` cannot disagree about where the store is. PostgreSQL's
driver is imported only when a URL asks for it: the default install (and stdio `serve`'s cold start) never loads it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp_harness.errors import StorageError
from mcp_harness.store.db import Database
from mcp_harness.store.migrations import MIGRATIONS

if TYPE_CHECKING:
    from mcp_harness.config import Settings
    from mcp_harness.store.pg import PgDatabase


def open_store(settings: Settings, *, migrate: bool = True) -> Database | PgDatabase:
    """The migrated store the settings name (PostgreSQL: `migrate=False` leaves its schema as it is)."""
    if settings.store.url is None:
        return Database(settings.data_dir / "harness.db")
    try:
        from mcp_harness.store.pg import PgDatabase
    except ImportError as exc:
        raise StorageError(
            f"[store] url names a PostgreSQL database but its driver is missing ({exc.name}): install the "
            "postgres extra (`pip install 'seed-harness[postgres]'`) or remove [store] url to use SQLite."
        ) from exc
    return PgDatabase(settings.store.url, migrate=migrate, data_dir=settings.data_dir)


def open_serving_store(settings: Settings) -> Database | PgDatabase:
    """`open_store`, and on PostgreSQL the check that the data root is the store's shared one
    (store/store_meta.py): what a harness that serves or acts opens; `migrate` needs no data root."""
    db = open_store(settings)
    if settings.store.url is not None:
        from mcp_harness.store.pg import _redacted as redacted  # the same redaction as pg.py's messages
        from mcp_harness.store.store_meta import check_data_root

        try:
            check_data_root(db, settings.data_dir, redacted(settings.store.url))
        except BaseException:
            db.close()
            raise
    return db


@dataclass(frozen=True, slots=True)
class SchemaState:
    """Which migrations a store has taken and which it lacks (`mcp-harness migrate --status`, `doctor`)."""

    backend: str
    where: str
    """The SQLite file, or the PostgreSQL URL without its password."""
    applied: tuple[str, ...]
    pending: tuple[str, ...]
    unknown: tuple[str, ...] = ()
    """Steps the store has that this version does not know: a newer mcp-harness wrote it (it is refused)."""


def migrate_store(settings: Settings) -> tuple[SchemaState, list[str]]:
    """Apply what the store lacks; returns its state before and the names applied by this call. PostgreSQL takes
    its migration lock (store/pg_migrations.py): replicas starting at once wait, and each step is applied once."""
    before = schema_state(settings)
    if settings.store.url is None:
        # Database() migrates as it opens, under SQLite's write lock (store/migrations.py re-checks each step).
        open_store(settings).close()
        return before, [n for n in before.pending if n in schema_state(settings).applied]
    from mcp_harness.store.pg_migrations import migrate

    db = open_store(settings, migrate=False)
    try:
        with db.reading() as conn:
            applied = migrate(conn)  # pyright: ignore[reportArgumentType]  (PgDatabase reads through PgConnection)
    finally:
        db.close()
    return before, applied


def schema_state(settings: Settings) -> SchemaState:
    """The store's migrations, read without applying any (a database not created yet lacks them all)."""
    names = [fn.__name__ for fn in MIGRATIONS]
    url = settings.store.url
    done: set[str] = set()
    if url is None:
        path = settings.data_dir / "harness.db"
        where = str(path)
        if path.exists():
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
            try:
                done = {str(r[0]) for r in conn.execute("SELECT name FROM _harness_migrations")}
            except sqlite3.OperationalError:
                pass  # no table yet: nothing applied
            finally:
                conn.close()
        backend = "sqlite"
    else:
        import psycopg

        from mcp_harness.store.pg import _redacted as redacted  # the same redaction as pg.py's messages

        where, backend = redacted(url), "postgresql"
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as raw:
                if raw.execute("SELECT to_regclass('_harness_migrations')").fetchone() != (None,):
                    done = {str(r[0]) for r in raw.execute("SELECT name FROM _harness_migrations")}
        except psycopg.Error as exc:
            raise StorageError(
                f"Cannot connect to the PostgreSQL database at {where}: {str(exc).strip()}. Check [store] url."
            ) from exc
    return SchemaState(
        backend,
        where,
        tuple(n for n in names if n in done),
        tuple(n for n in names if n not in done),
        tuple(sorted(done - set(names))),
    )


def backend_of(db: object) -> str:
    """The backend's name, "postgresql" or "sqlite", for messages and the checks that differ."""
    return "sqlite" if isinstance(db, Database) else "postgresql"


__all__ = ["SchemaState", "backend_of", "migrate_store", "open_serving_store", "open_store", "schema_state"]
