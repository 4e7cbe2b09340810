"""`PgConnection`: the subset of `sqlite3.Connection` the stores use, over one psycopg connection (store/pg.py).

Each query is translated once by `store/dialect.py`. Results are fetched eagerly: a cursor stays readable after its
connection went back to the pool, as SQLite's do after `transaction()` returns (several stores read `cur.rowcount`
there). Rows answer by index and by column name, as `sqlite3.Row` does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, LiteralString, cast

import psycopg
from psycopg import errors as pg_errors
from psycopg.abc import Buffer
from psycopg.adapt import Dumper
from psycopg.pq import TransactionStatus
from psycopg.types.string import StrDumperUnknown

from mcp_harness.store.dialect import Style, to_pg


class Row(tuple[Any, ...]):
    """A result row like `sqlite3.Row`: by index, by column name, `keys()`, and `dict(row)`."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


class PgCursor:
    """A finished statement: its rows (fetched already), `rowcount`, `description`."""

    def __init__(self, rows: list[Row], rowcount: int, description: Any) -> None:
        self._rows = rows
        self._at = 0
        self.rowcount = rowcount
        self.description = description
        self.lastrowid = None  # PostgreSQL has no rowid: write `RETURNING id` instead (docs/postgres.md)

    def fetchone(self) -> Row | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[Row]:
        rest, self._at = self._rows[self._at :], len(self._rows)
        return rest

    def fetchmany(self, size: int = 1) -> list[Row]:
        part = self._rows[self._at : self._at + size]
        self._at += len(part)
        return part

    def __iter__(self) -> Iterator[Row]:
        while (row := self.fetchone()) is not None:
            yield row


class _BoolDumper(Dumper):
    # SQLite has no booleans: the stores pass True/False for INTEGER columns and for `CASE WHEN ?`. Sent untyped as
    # '1'/'0', PostgreSQL reads each the way its context wants (bigint or boolean).
    oid = 0

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class _TextDumper(StrDumperUnknown):
    # PostgreSQL's text cannot hold NUL, SQLite's can, and what the stores write comes from outside (tool names,
    # titles, messages): NUL becomes U+FFFD in every str parameter, writes and lookups alike, so a key still finds
    # its row. (Untyped, as psycopg's default: PostgreSQL reads the value as whatever its context wants.)

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


class PgConnection:
    """The `sqlite3.Connection` subset the stores use, over one psycopg connection."""

    backend = "postgres"
    """What `dialect.backend` reads, for the queries written per backend."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        self.total_changes = 0

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = ()) -> PgCursor:
        style: Style = "none" if not params else ("named" if isinstance(params, Mapping) else "qmark")
        args = None if style == "none" else params
        cursor: PgCursor | None = None
        for statement in to_pg(sql, style):
            cursor = self._run(statement, args)
        assert cursor is not None
        return cursor

    def executemany(self, sql: str, seq: Iterable[Sequence[Any] | Mapping[str, Any]]) -> PgCursor:
        total = 0
        for params in seq:
            total += max(self.execute(sql, params).rowcount, 0)
        return PgCursor([], total, None)

    def _run(self, statement: str, args: Any) -> PgCursor:
        try:
            with self.raw.cursor() as cur:
                cur.execute(literal(statement), args)
                rows: list[Row] = []
                if cur.description is not None:
                    names = {column.name: i for i, column in enumerate(cur.description)}
                    rows = [Row(values, names) for values in cur.fetchall()]
                else:
                    self.total_changes += max(cur.rowcount, 0)
                return PgCursor(rows, cur.rowcount, cur.description)
        except pg_errors.IntegrityError as exc:
            # The stores catch SQLite's class (a lost race on a unique key); PostgreSQL's aborts the transaction
            # too, so a store that goes on after one must have run the statement in a nested `transaction()`.
            raise sqlite3.IntegrityError(str(exc)) from exc


def literal(sql: str) -> LiteralString:
    # psycopg types queries as literal strings against injection; these are the dialect layer's translations of the
    # stores' own literal texts (values always travel as parameters) and savepoint names made here.
    return cast(LiteralString, sql)


def configure(raw: psycopg.Connection[Any]) -> None:
    raw.adapters.register_dumper(bool, _BoolDumper)
    raw.adapters.register_dumper(str, _TextDumper)


__all__ = ["PgConnection", "PgCursor", "Row", "configure", "literal"]
