"""Many rows in one INSERT statement: what a reply's worth of children writes per table.

Why not `executemany`: it runs one statement per row, and each statement is a sub-transaction of its own. Once a
transaction has written an FTS5 table (the search index, `store/search.py`; a `sessions` insert writes it through
its title trigger), SQLite flushes FTS5's pending terms into a new index segment at each such statement, so ten rows
cost ten segments and the merges that follow. One multi-row statement writes one, and pays the statement overhead
once: about half the cost per row for a batch of ten children here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_harness.store.port import Connection

CHUNK = 100
"""Rows per statement: well under SQLite's bound on host parameters (32,766) for the widest table written so."""


def insert_rows(conn: Connection, head: str, row: str, rows: Sequence[Sequence[Any]]) -> None:
    """`head` + `row` repeated once per row, e.g. `INSERT INTO t (a, b) VALUES` and `(?, ?)`, in statements of at
    most `CHUNK` rows. Row order is kept."""
    for start in range(0, len(rows), CHUNK):
        part = rows[start : start + CHUNK]
        conn.execute(f"{head} {', '.join([row] * len(part))}", [value for values in part for value in values])


__all__ = ["CHUNK", "insert_rows"]
