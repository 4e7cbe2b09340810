"""The callables each session has touched (`session_touched`, migration m009), kept by `SessionStore.append_many`.

Promotion (HARNESS §5) makes a callable a real MCP tool once a session has read `~/tools/<name>` or called `<name>`,
as the agent (a user's calls never count). That used to be recomputed by decoding every `tool_call` of the session
on each `tools/list` and each call, a cost that grew with the session's history; the names are kept here instead,
in the append's own transaction, so the answer costs one indexed read however long the session is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp_harness.store.port import Connection

TOOLS_PREFIX = "~/tools/"


def touched_name(payload: dict[str, Any], actor: str) -> str | None:
    """The callable a logged `tool_call` touches, if it touches one: `read ~/tools/<name>` or `call <name>`."""
    if payload.get("type") != "tool_call" or actor == "user":
        return None
    arguments = payload.get("input")
    if not isinstance(arguments, dict):
        return None
    if payload.get("name") == "read":
        address = arguments.get("address")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(address, str) and address.strip().startswith(TOOLS_PREFIX):
            name = address.strip()[len(TOOLS_PREFIX) :].rstrip("/")
            return name or None
    elif payload.get("name") == "call":
        tool = arguments.get("tool")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(tool, str) and tool.strip():
            return tool.strip()
    return None


def track(conn: Connection, session_id: str, events: Iterable[tuple[dict[str, Any], str]]) -> None:
    """Record what these appended events touch (inside the append's transaction)."""
    names = {name for payload, actor in events if (name := touched_name(payload, actor)) is not None}
    if names:
        conn.executemany(
            "INSERT OR IGNORE INTO session_touched (session_id, name) VALUES (?, ?)",
            [(session_id, name) for name in sorted(names)],
        )


def names(conn: Connection, session_id: str) -> set[str]:
    """Every callable name the session has touched."""
    rows = conn.execute("SELECT name FROM session_touched WHERE session_id = ?", (session_id,)).fetchall()
    return {str(row[0]) for row in rows}


def names_of(conn: Connection, session_ids: list[str]) -> dict[str, set[str]]:
    """`names` of several sessions in one read; a session that touched nothing is absent."""
    if not session_ids:
        return {}
    marks = ",".join("?" * len(session_ids))
    rows = conn.execute(f"SELECT session_id, name FROM session_touched WHERE session_id IN ({marks})", session_ids)
    out: dict[str, set[str]] = {}
    for row in rows.fetchall():
        out.setdefault(str(row[0]), set()).add(str(row[1]))
    return out


__all__ = ["names", "names_of", "touched_name", "track"]
