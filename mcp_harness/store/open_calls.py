"""The logged tool calls still owed a result (`open_calls`, migration m008), kept by `SessionStore.append_many`.

A `tool_call` event inserts its row and its `tool_result` deletes it, in the append's own transaction, so the table
is exactly "calls without a result" and stays as small as the work in flight: finding what a crash left unanswered
reads this table, never the log. Each row names the instance that opened it (`store/instances.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.store import instances
from mcp_harness.store.batch import CHUNK
from mcp_harness.store.port import Connection


@dataclass(frozen=True, slots=True)
class OpenCall:
    session_id: str
    call_id: str
    name: str
    actor: str
    instance_id: str | None
    """The instance that logged the call; None for calls logged before m008 (their opener is unknown: dead)."""


Appended = Sequence[tuple[dict[str, Any], str, int]]
"""Events just appended to one session, as `(payload, actor, seq)`."""


def track(conn: Connection, session_id: str, appended: Appended, instance: str, ts: int) -> None:
    """Keep the table in step with events just appended (in the append's transaction). A call answered in the same
    batch (a quick verb's call and result, committed together) is never open: it gets no row, and its holder's row
    is not touched for it."""
    track_across(conn, [(session_id, appended)], instance, ts)


def track_across(conn: Connection, appends: Sequence[tuple[str, Appended]], instance: str, ts: int) -> None:
    """`track` of several sessions' appends at once (a session may come twice: its events then follow in order).

    Rows of two sessions never share a key, so only each session's own order matters: a session whose change is
    only opened calls, or only closed ones, joins the others' in one statement (ten parents spawning, or ten parents
    delivered to, in one batch: one insert or one delete, not ten); a session that both opens and closes makes its
    changes alone, in its log's order."""
    by_session: dict[str, list[tuple[dict[str, Any], str, int]]] = {}
    for session_id, appended in appends:
        by_session.setdefault(session_id, []).extend(appended)
    opened: list[tuple[Any, ...]] = []
    closed: list[tuple[str, str]] = []
    touched = False
    for session_id, appended in by_session.items():
        steps = _steps(session_id, appended, instance, ts)
        if not touched and any(kind == "open" for kind, _ in steps):
            instances.touch(conn, [instance])  # pyright: ignore[reportArgumentType]  (typed sqlite3's still)
            touched = True
        if len(steps) == 1:
            kind, part = steps[0]
            if kind == "open":
                opened += part
            else:
                closed += [(session_id, call_id) for call_id in part]
            continue
        for kind, part in steps:
            if kind == "open":
                _insert(conn, part)
            else:
                _delete(conn, [(session_id, call_id) for call_id in part])
    _insert(conn, opened)
    _delete(conn, closed)


def _steps(session_id: str, appended: Appended, instance: str, ts: int) -> list[tuple[str, list[Any]]]:
    """The session's changes in log order: `("open", rows)` for consecutive calls (inserted in one statement before
    whatever follows them), `("close", call ids)` for consecutive results (deleted in one)."""
    answered_later: set[tuple[int, str]] = set()
    results: set[str] = set()
    for i in range(len(appended) - 1, -1, -1):
        payload = appended[i][0]
        if payload["type"] == "tool_result":
            results.add(str(payload.get("toolCallId") or ""))
        elif payload["type"] == "tool_call" and payload["id"] in results:
            answered_later.add((i, payload["id"]))
    steps: list[tuple[str, list[Any]]] = []
    for i, (payload, actor, seq) in enumerate(appended):
        if payload["type"] == "tool_call":
            call_id = payload["id"]
            if (i, call_id) in answered_later:
                continue
            row = (session_id, call_id, seq, str(payload.get("name") or ""), actor, instance, ts)
            kind, item = "open", row
        elif payload["type"] == "tool_result":
            kind, item = "close", str(payload.get("toolCallId") or "")
        else:
            continue
        if steps and steps[-1][0] == kind:
            steps[-1][1].append(item)
        else:
            steps.append((kind, [item]))
    return steps


def _delete(conn: Connection, keys: Sequence[tuple[str, str]]) -> None:
    """Delete the rows of `(session_id, call_id)` keys, one `session_id = ? AND call_id IN (…)` term per session
    (OR-ed: each term is probes of the primary key; a row-value `IN (VALUES …)` would scan the table)."""
    for start in range(0, len(keys), CHUNK):
        by_session: dict[str, list[str]] = {}
        for session_id, call_id in keys[start : start + CHUNK]:
            by_session.setdefault(session_id, []).append(call_id)
        terms = [f"(session_id = ? AND call_id IN ({', '.join('?' * len(ids))}))" for ids in by_session.values()]
        args = [value for session_id, ids in by_session.items() for value in (session_id, *ids)]
        conn.execute(f"DELETE FROM open_calls WHERE {' OR '.join(terms)}", args)


def _insert(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    # A repeated call id keeps its first place in the log, as a transcript replay orders it (a row repeated within
    # one statement meets the conflict clause as it would in a statement of its own).
    for start in range(0, len(rows), CHUNK):
        part = rows[start : start + CHUNK]
        conn.execute(
            "INSERT INTO open_calls (session_id, call_id, seq, name, actor, instance_id, created_at) VALUES "
            + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(part))
            + " ON CONFLICT(session_id, call_id) DO UPDATE SET name = excluded.name, actor = excluded.actor, "
            "instance_id = excluded.instance_id",
            [value for row in part for value in row],
        )


def _open(row: Any) -> OpenCall:
    return OpenCall(
        session_id=row["session_id"],
        call_id=row["call_id"],
        name=row["name"],
        actor=row["actor"],
        instance_id=row["instance_id"],
    )


def in_session(conn: Connection, session_id: str) -> list[OpenCall]:
    """The session's open calls, in log order."""
    rows = conn.execute("SELECT * FROM open_calls WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
    return [_open(r) for r in rows]


def sessions_among(conn: Connection, session_ids: Sequence[str]) -> set[str]:
    """Which of the sessions have any call open."""
    if not session_ids:
        return set()
    marks = ", ".join("?" for _ in session_ids)
    rows = conn.execute(f"SELECT DISTINCT session_id FROM open_calls WHERE session_id IN ({marks})", list(session_ids))
    return {str(r[0]) for r in rows.fetchall()}


def among(conn: Connection, session_id: str, call_ids: Sequence[str]) -> set[str]:
    """Which of `call_ids` are open on the session."""
    wanted = sorted(set(call_ids))
    if not wanted:
        return set()
    marks = ", ".join("?" for _ in wanted)
    rows = conn.execute(
        f"SELECT call_id FROM open_calls WHERE session_id = ? AND call_id IN ({marks})", (session_id, *wanted)
    ).fetchall()
    return {str(r[0]) for r in rows}


def orphaned(conn: Connection, live: Collection[str]) -> list[OpenCall]:
    """Open calls, in every session, whose opener is not among the `live` instances; by session, in log order."""
    condition, args = instances.not_in("instance_id", live)
    rows = conn.execute(f"SELECT * FROM open_calls WHERE {condition} ORDER BY session_id, seq", args).fetchall()
    return [_open(r) for r in rows]


__all__ = ["OpenCall", "among", "in_session", "orphaned", "track", "track_across"]
