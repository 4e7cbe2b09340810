"""Each hypermedia resource's winning Ref and the materialized state of its heads (`hm_documents`, migration m010).

Kept in the transaction that stores the blobs (`HypermediaStore.put`), so it is never behind them: after each put,
every resource a new Ref names gets its winner recomputed (the same order `current_ref` uses) and, when the winner
changed and is live, the `Snapshot` its heads denote — copied from a resource already at those heads (a move),
else advanced from the resource's previous snapshot by the new changes, else replayed (`hypermedia/materialized.py`
says when which). A live resource whose history is not all held yet (blobs from elsewhere, arriving out of order)
is stored `pending`, without a state, and retried when Changes arrive; until then, and for a history that cannot
be applied at all, a read replays as before and reports what is missing or wrong.

Rows also carry `parent` (the path one segment up), so a directory is an index range and not a scan of every Ref,
and `hm_path_counts` keeps, for each path, how many live resources are directly below it and below it at any depth,
changed along the path's ancestors whenever a resource comes alive or goes: a page of a directory with its total
and every entry's descendant count costs the page.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.documents import ChangeRecord
from mcp_harness.hypermedia.materialized import Snapshot, materialize
from mcp_harness.store.port import Connection

Resource = tuple[str, str]
"""(space, path)"""


def parent_of(path: str) -> str | None:
    """The path one segment up (`""` for a top-level path), None for the home document or a path without `/`."""
    cut = path.rfind("/")
    return path[:cut] if cut >= 0 else None


def load_changes(conn: Connection, cids: Iterable[str]) -> dict[str, ChangeRecord]:
    """The Changes among `cids` held here, decoded for applying (one level: deps are not followed)."""
    wanted = list(dict.fromkeys(cids))
    records: dict[str, ChangeRecord] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT c.cid, c.author, c.ts, c.depth, c.deps, b.data FROM hm_changes c JOIN hm_blobs b "
            f"ON b.cid = c.cid WHERE c.cid IN ({marks})",
            chunk,
        ).fetchall()
        for cid, author, ts, depth, deps, data in rows:
            value = decode(bytes(data))
            body = value.get("body") if isinstance(value, dict) else None
            ops = body.get("ops") if isinstance(body, dict) else None
            records[cid] = ChangeRecord(
                cid=cid,
                author=author,
                ts=ts,
                depth=depth,
                deps=tuple(d for d in deps.split(".") if d),
                ops=tuple(op for op in ops or () if isinstance(op, dict)),
            )
    return records


def refresh(conn: Connection, resources: Iterable[Resource], *, changes_arrived: bool) -> None:
    """Bring the rows of `resources` (and, when Changes arrived, every pending one) up to date with the blobs."""
    keys = list(dict.fromkeys(resources))
    before = {key: conn.execute(_ROW, key).fetchone() for key in keys}
    # The states these resources had, by heads: a Ref that moves a document names heads another row already has.
    by_heads = {row[1]: row[3] for row in before.values() if row is not None and row[3] is not None}
    for key in keys:
        winner = _winner(conn, key)
        old = before[key]
        if winner is None or (old is not None and old[0] == winner[0]):
            continue
        ref, heads, redirected = winner
        live = bool(heads) and not redirected
        state, pending = _state(conn, heads, old[3] if old is not None else None, by_heads) if live else (None, 0)
        conn.execute(
            "INSERT INTO hm_documents (space, path, parent, ref, live, heads, pending, state) "
            "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (space, path) DO UPDATE SET parent = excluded.parent, "
            "ref = excluded.ref, live = excluded.live, heads = excluded.heads, pending = excluded.pending, "
            "state = excluded.state",
            (*key, parent_of(key[1]), ref, int(live), heads, pending, state),
        )
        delta = int(live) - (old[2] if old is not None else 0)
        if delta:
            count(conn, key, delta)
    if changes_arrived:
        waiting = conn.execute("SELECT space, path, heads FROM hm_documents WHERE pending = 1").fetchall()
        for space, path, heads in waiting:
            state, pending = _state(conn, heads, None, {})
            if not pending:
                conn.execute(
                    "UPDATE hm_documents SET state = ?, pending = 0 WHERE space = ? AND path = ?", (state, space, path)
                )


Row = tuple[str, str, str | None, str, int, str, int, bytes | None]
"""An `hm_documents` row: space, path, parent, ref, live, heads, pending, state."""


def count(conn: Connection, key: Resource, delta: int) -> None:
    """Count a resource coming alive (+1) or going (-1) at its parent and every ancestor."""
    space, path = key
    ancestor, direct = parent_of(path), 1
    while ancestor is not None:
        conn.execute(
            "INSERT INTO hm_path_counts (space, path, children, descendants) VALUES (?, ?, ?, ?) "
            # The row's own columns by table name: PostgreSQL calls a bare `children` ambiguous with `excluded`'s.
            "ON CONFLICT (space, path) DO UPDATE SET children = hm_path_counts.children + excluded.children, "
            "descendants = hm_path_counts.descendants + excluded.descendants",
            (space, ancestor, delta * direct, delta),
        )
        ancestor, direct = parent_of(ancestor), 0


def rows_for_backfill(conn: Connection) -> Iterator[Row]:
    """Every resource's row, computed from the Refs and Changes already stored (the m010 backfill)."""
    resources = conn.execute("SELECT DISTINCT space, path FROM hm_refs ORDER BY space, path").fetchall()
    for space, path in resources:
        winner = _winner(conn, (space, path))
        assert winner is not None
        ref, heads, redirected = winner
        live = bool(heads) and not redirected
        state, pending = _state(conn, heads, None, {}) if live else (None, 0)
        yield space, path, parent_of(path), ref, int(live), heads, pending, state


_ROW = "SELECT ref, heads, live, state FROM hm_documents WHERE space = ? AND path = ?"


def _winner(conn: Connection, key: Resource) -> tuple[str, str, bool] | None:
    row = conn.execute(
        "SELECT cid, heads, redirect_space IS NOT NULL FROM hm_refs WHERE space = ? AND path = ? "
        "ORDER BY generation DESC, ts DESC, cid DESC LIMIT 1",
        key,
    ).fetchone()
    return None if row is None else (row[0], row[1], bool(row[2]))


def _state(
    conn: Connection, heads: str, previous: bytes | None, by_heads: dict[str, bytes]
) -> tuple[bytes | None, int]:
    """The stored snapshot for `heads` and whether it waits on changes not held yet."""
    same = by_heads.get(heads)
    if same is None:
        row = conn.execute(
            "SELECT state FROM hm_documents WHERE heads = ? AND live = 1 AND state IS NOT NULL LIMIT 1", (heads,)
        ).fetchone()
        same = None if row is None else bytes(row[0])
    if same is not None:
        return same, 0
    base = Snapshot.from_bytes(previous) if previous is not None else None

    def load(cids: Sequence[str]) -> dict[str, ChangeRecord]:
        return load_changes(conn, cids)

    try:
        snapshot = materialize(heads.split("."), load, base)
    except NotFound:
        return None, 1
    except BadRequest:
        return None, 0  # a read replays it and refuses it with the same message
    return snapshot.to_bytes(), 0
