"""A run's children in its usage: each terminal child's tokens and count roll up into the parent's `usage.children`
block (HARNESS §8), in the transaction of the child's terminal commit.

`grouped` holds those roll-ups back to its end and makes one per parent, of all the children that ended inside it:
the store lane settles a fan-out's siblings as one batch (runs/settle_batch.py), and ten roll-ups into one parent
were ten reads and writes of the same row. The sums are the same either way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mcp_harness.runs.policy import is_zero, plus, tokens
from mcp_harness.runs.records import TERMINAL
from mcp_harness.store._util import now_ms
from mcp_harness.store.run_claims import dump_cbor, load_cbor

_held: ContextVar[dict[str, tuple[dict[str, int], int]] | None] = ContextVar("held_roll_ups", default=None)
"""Inside `grouped`: per parent run, the summed tokens of its children that ended, and their count."""


def child_ended(conn: sqlite3.Connection, parent_id: str, delta: Mapping[str, int]) -> None:
    """A child of `parent_id` reached a terminal status with `delta` tokens (its own and its children's): roll it
    up now, or, inside `grouped`, at its end."""
    held = _held.get()
    if held is None:
        roll_up(conn, parent_id, delta, runs=1)
        return
    before, runs = held.get(parent_id, ({}, 0))
    held[parent_id] = (plus(tokens(before), delta), runs + 1)


@contextmanager
def grouped(conn: sqlite3.Connection) -> Iterator[None]:
    """Roll-ups held back inside and made at the end, one per parent, in `conn`'s open transaction; none when the
    body raises (its transaction rolls back with the terminal commits that held them)."""
    held: dict[str, tuple[dict[str, int], int]] = {}
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
    for parent_id, (delta, runs) in held.items():
        roll_up(conn, parent_id, delta, runs=runs)


def roll_up(conn: sqlite3.Connection, parent_id: str | None, delta: Mapping[str, int], *, runs: int) -> None:
    """Add `delta` to the parent's `usage.children` (and `runs` to its count). A parent that is itself already
    terminal has rolled up once, so the delta travels on to every ancestor to keep each block a true sum."""
    while parent_id is not None and (runs or not is_zero(delta)):
        row = conn.execute("SELECT usage_cbor, status, parent_run_id FROM runs WHERE id = ?", (parent_id,)).fetchone()
        if row is None:
            return
        usage = load_cbor(row["usage_cbor"]) or {}
        children = usage.get("children") or {}
        block: dict[str, Any] = {**plus(tokens(children), delta), "runs": int(children.get("runs") or 0) + runs}
        updated = {**tokens(usage), **usage, "children": block}
        conn.execute(
            "UPDATE runs SET usage_cbor = ?, updated_at = ? WHERE id = ?", (dump_cbor(updated), now_ms(), parent_id)
        )
        if row["status"] not in TERMINAL:
            return
        parent_id, runs = row["parent_run_id"], 0


__all__ = ["child_ended", "grouped", "roll_up"]
