"""The Sessions page and one session's page: listings, filters, search, the actor-stamped timeline, plan, children.

A session's status is its latest run's (idle when it never ran): the `sessions.status` column is not kept, and
the run is what a person watching wants to know about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_harness.console.runs import root_runs_of_session
from mcp_harness.scope import Scope
from mcp_harness.services import Stores
from mcp_harness.store.sessions import EventRecord, SessionRecord

TIMELINE_WINDOW = 500
"""Newest events a session page shows (older ones are counted, not rendered)."""
LIST_LIMIT = 200
STATUSES = ("live", "idle", "succeeded", "failed", "canceled")
_LIVE = frozenset({"queued", "claimed", "running", "waiting"})


def kind_of(session: SessionRecord) -> str:
    """A detached child is stored as a conversation with a parent."""
    if session.kind == "conversation" and session.parent_session_id is not None:
        return "detached child"
    return session.kind


def _statuses(stores: Stores, ids: Sequence[str]) -> dict[str, str]:
    """Each session's latest run status, in one read."""
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    with stores.db.reading() as conn:
        rows = conn.execute(
            f"SELECT session_id, status FROM runs WHERE session_id IN ({marks}) ORDER BY created_at, id", list(ids)
        ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _unanswered(stores: Stores, ids: Sequence[str]) -> dict[str, int]:
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    with stores.db.reading() as conn:
        rows = conn.execute(
            f"SELECT session_id, COUNT(*) FROM open_calls WHERE session_id IN ({marks}) GROUP BY session_id", list(ids)
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def status_group(run_status: str | None) -> str:
    """What the Sessions filter calls a run status: live covers queued, claimed, running and waiting."""
    if run_status is None:
        return "idle"
    return "live" if run_status in _LIVE else run_status


def agent_names(stores: Stores, scope: Scope) -> dict[str, str]:
    """Agent id → name, for the agents the caller may see."""
    return {
        a.id: a.definition.name
        for a in stores.agents.list(scope.account_id)
        if scope.agent_id is None or a.id == scope.agent_id
    }


def session_rows(
    stores: Stores, scope: Scope, *, agent: str | None = None, status: str | None = None, query: str | None = None
) -> dict[str, Any]:
    """The Sessions page: sessions newest-updated first, filtered by agent (name or id) and status group, or found
    by full-text search over titles and messages (the thread search index)."""
    names = agent_names(stores, scope)
    agent_id: str | None = None
    if agent:
        agent_id = next((i for i, n in names.items() if agent in (i, n)), "")  # "" matches nothing: not yours
    wanted = "" if agent_id == "" else scope.agent_filter(agent_id)
    snippets: dict[str, str | None] = {}
    if wanted == "":
        records = []
    elif query and query.strip():
        found = stores.sessions.search(scope.account_id, query, agent_id=wanted, limit=LIST_LIMIT)
        records = [s for s, _ in found]
        snippets = {s.id: snip for s, snip in found}
    else:
        records = stores.sessions.list(scope.account_id, agent_id=wanted, limit=LIST_LIMIT)
    records = [s for s in records if scope.sees(s) and (wanted is None or s.agent_id == wanted)]
    ids = [s.id for s in records]
    runs, open_calls = _statuses(stores, ids), _unanswered(stores, ids)
    rows = []
    for s in records:
        group = status_group(runs.get(s.id))
        if status and status != group:
            continue
        row: dict[str, Any] = {
            "id": s.id,
            "agentId": s.agent_id,
            "agent": names.get(s.agent_id, s.agent_id),
            "title": s.title,
            "kind": kind_of(s),
            "status": group,
            "runStatus": runs.get(s.id),
            "parentSessionId": s.parent_session_id,
            "updatedAt": s.updated_at,
            "unanswered": open_calls.get(s.id, 0),
        }
        if snippets.get(s.id):
            row["snippet"] = snippets[s.id]
        rows.append(row)
    return {
        "sessions": rows,
        "agents": [{"id": i, "name": n} for i, n in names.items()],
        "filters": {"agent": agent or "", "status": status or "", "query": query or ""},
        "statuses": list(STATUSES),
    }


def timeline(events: Sequence[EventRecord], open_ids: set[str]) -> list[dict[str, Any]]:
    """Events as timeline items: messages, each tool call paired with its result, errors; every item keeps its
    actor and raw event for the "raw JSON" disclosure."""
    items: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for e in events:
        p = e.payload
        base = {"seq": e.seq, "actor": e.actor, "at": e.created_at}
        if e.type == "message":
            items.append({**base, "type": "message", "role": p.get("role", "user"), "text": str(p.get("content", ""))})
        elif e.type == "tool_call":
            item = {**base, "type": "tool", "name": p.get("name"), "callId": p.get("id"), "input": p.get("input")}
            item["state"] = "open" if p.get("id") in open_ids else "pending"
            calls[str(p.get("id"))] = item
            items.append(item)
        elif e.type == "tool_result":
            call = calls.get(str(p.get("toolCallId")))
            outcome = {"seq": e.seq, "actor": e.actor, "at": e.created_at}
            outcome |= {"error": p["error"]} if "error" in p else {"output": p.get("output")}
            if call is None:
                items.append({**base, "type": "tool", "name": p.get("name"), "callId": p.get("toolCallId")})
                call = items[-1]
            call["result"] = outcome
            call["state"] = "error" if "error" in p else "ok"
        elif e.type == "error":
            items.append({**base, "type": "error", "text": str(p.get("message", ""))})
        else:
            items.append({**base, "type": "other", "text": e.type, "raw": p})
    return items


def memory_changes(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Writes this session made to an agent's memory, from its `write` calls (address, seq, whether it worked)."""
    out = []
    for item in items:
        if item.get("type") != "tool" or item.get("name") != "write" or not isinstance(item.get("input"), dict):
            continue
        address = item["input"].get("address")
        if isinstance(address, str) and address.startswith("~/memory"):
            out.append({"address": address, "seq": item["seq"], "state": item.get("state")})
    return out


def session_view(stores: Stores, scope: Scope, session_id: str) -> dict[str, Any]:
    """One session: its row, timeline, plan, child sessions, runs and memory changes.

    Raises:
        NotFound: no such session, or one the caller may not see.
    """
    session = scope.session(stores.sessions.find(session_id), session_id)
    events = stores.sessions.events(session.id, last=TIMELINE_WINDOW)
    open_ids = {c.call_id for c in stores.sessions.open_calls(session.id)}
    items = timeline(events, open_ids)
    with stores.db.reading() as conn:
        total = int(
            conn.execute("SELECT COUNT(*) FROM session_events WHERE session_id = ?", (session.id,)).fetchone()[0]
        )
        child_rows = conn.execute(
            "SELECT id FROM sessions WHERE parent_session_id = ? ORDER BY created_at, id", (session.id,)
        ).fetchall()
    children = [c for r in child_rows if scope.sees(c := stores.sessions.find(str(r[0])))]
    statuses = _statuses(stores, [c.id for c in children if c is not None])
    names = agent_names(stores, scope)
    runs = root_runs_of_session(stores, scope, session.id)
    data: dict[str, Any] = {
        "session": {
            "id": session.id,
            "title": session.title,
            "description": session.description,
            "agentId": session.agent_id,
            "agent": names.get(session.agent_id, session.agent_id),
            "kind": kind_of(session),
            "parentSessionId": session.parent_session_id,
            "runId": session.run_id,
            "createdAt": session.created_at,
            "updatedAt": session.updated_at,
        },
        "timeline": items,
        "earlier": max(0, total - len(events)),
        "unanswered": len(open_ids),
        "children": [
            {
                "id": c.id,
                "title": c.title,
                "kind": kind_of(c),
                "status": status_group(statuses.get(c.id)),
                "runId": c.run_id,
            }
            for c in children
            if c is not None
        ],
        "runs": [{"id": r.id, "title": r.title, "status": r.status, "kind": r.kind} for r in runs],
        "memoryChanges": memory_changes(items),
    }
    if session.parent_session_id and scope.sees(stores.sessions.find(session.parent_session_id)):
        data["parent"] = session.parent_session_id
    plan = stores.sessions.get_plan(session.id)
    if plan:
        data["plan"] = plan
    return data


__all__ = ["LIST_LIMIT", "STATUSES", "agent_names", "kind_of", "session_rows", "session_view", "timeline"]
