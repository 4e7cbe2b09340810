"""The store port: what the stores need of a database, met by SQLite's `Database` and PostgreSQL's `PgDatabase`.

Most stores take a `Store` and a `Connection` (rows are `Any`: `sqlite3.Row` or `pg_connection.Row`, both read by
index and by column name), so either backend passes without a cast. Both classes satisfy these structurally —
`tests/store/test_pg_port.py` has pyright check it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Cursor(Protocol):
    """A statement's result: rows readable by index and by column name."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int = ..., /) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """The subset of `sqlite3.Connection` the stores use (SQL in SQLite's dialect; `store/dialect.py` maps it)."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...


class Store(Protocol):
    """A migrated database: atomic changes, reads, commit hooks, and a way off the event loop."""

    @property
    def instance_id(self) -> str:
        """This process's id in `instances` (the owner its open calls and claims are recorded under)."""
        ...

    def transaction(self) -> AbstractContextManager[Connection]: ...

    def joined(self) -> AbstractContextManager[Connection]:
        """The caller's open transaction without a savepoint, else a new one: for steps whose failure propagates."""
        ...

    def reading(self) -> AbstractContextManager[Connection]: ...

    def after_commit(self, fn: Callable[[], None]) -> None: ...

    def on_every_commit(self, fn: Callable[[], None]) -> Callable[[], None]: ...

    def data_version(self) -> int: ...

    def run(self, fn: Callable[[Any], T], /) -> T: ...

    async def call(self, fn: Callable[[Any], T], /) -> T: ...

    async def quick(self, fn: Callable[[], T], /) -> T:
        """Run `fn` in one transaction, on the event loop when that cannot wait on anyone, else off it."""
        ...

    def close(self) -> None: ...


__all__ = ["Connection", "Cursor", "Store"]
