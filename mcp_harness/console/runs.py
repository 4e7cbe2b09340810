"""The run tree page's data: a run and its descendants with status, times, usage rolled up the tree, why each
waiting or queued run is not executing, the plan, and the script journal tail.

Usage is summed here from every node's own tokens rather than read from the store's `usage.children` block, which
only grows when a child ends: a live tree shows what its running children have spent so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cbor2

from mcp_harness.runs.policy import USAGE_KEYS, plus, tokens
from mcp_harness.runs.records import RunRecord
from mcp_harness.scope import Scope
from mcp_harness.services import Stores
from mcp_harness.store._util import now_ms
from mcp_harness.store.run_claims import run_record

JOURNAL_TAIL = 100
"""Journal entries of the tree's scripts shown, newest last (the reference's activity drawer shows 100)."""
_MAX_NODES = 500


def tree_rows(stores: Stores, run: RunRecord) -> list[RunRecord]:
    """Every run under the same root, shallowest first, in one indexed read (`runs_by_root`)."""
    with stores.db.reading() as conn:
        rows = conn.execute(
            "SELECT * FROM runs WHERE root_run_id = ? ORDER BY depth, created_at, id LIMIT ?",
            (run.root_run_id, _MAX_NODES),
        ).fetchall()
    return [run_record(r) for r in rows]


def wait_reason(stores: Stores, run: RunRecord, limits: Mapping[str, int], children: list[RunRecord]) -> str | None:
    """Why a run is not executing, in words: the children, timer or event it waits on, or what it is queued behind."""
    if run.status == "waiting":
        wait = run.wait or {}
        reason = wait.get("reason")
        if reason == "children":
            live = [c for c in children if not c.terminal]
            done = len(children) - len(live)
            return f"Waiting on {len(live)} sub-run{'s' if len(live) != 1 else ''} — {done} done"
        if reason == "timer":
            return "Waiting on a timer"
        if reason == "event":
            label = wait.get("label") or wait.get("signal")
            return "Waiting for an event" + (f" ({label})" if label else "")
        if reason == "budget-pause":
            return "Paused: its budget is spent"
        return f"Waiting ({reason})"
    if run.status != "queued":
        return None
    if run.not_before is not None and run.not_before > now_ms():
        return f"Queued: retry {run.attempt + 1} after a backoff"
    live, ahead, session_busy = stores.runs.queue_place(run)
    if session_busy:
        return "Queued behind its session's current turn"
    limit = limits.get(run.kind)
    if limit is not None and live >= limit:
        return f"Queued behind {live + ahead} run{'s' if live + ahead != 1 else ''} ({live} live, {ahead} queued)"
    return f"Queued ({ahead} before it)"


def _usage(run: RunRecord) -> dict[str, Any]:
    own: dict[str, Any] = tokens(run.usage)
    cost = (run.usage or {}).get("cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        own["cost"] = cost
    return own


def _node(
    stores: Stores, run: RunRecord, kids: dict[str, list[RunRecord]], limits: Mapping[str, int]
) -> dict[str, Any]:
    children = kids.get(run.id, [])
    built = [_node(stores, child, kids, limits) for child in children]
    own = _usage(run)
    rolled = {k: own[k] for k in USAGE_KEYS}
    for child in built:
        rolled = plus(rolled, child["usageRolledUp"])
    if "cost" in own or any("cost" in c["usageRolledUp"] for c in built):
        rolled["cost"] = own.get("cost", 0) + sum(c["usageRolledUp"].get("cost", 0) for c in built)  # pyright: ignore[reportArgumentType]
    node: dict[str, Any] = {
        "id": run.id,
        "kind": run.kind,
        "status": run.status,
        "title": run.title,
        "agentId": run.agent_id,
        "sessionId": run.session_id,
        "createdAt": run.created_at,
        "startedAt": run.started_at,
        "finishedAt": run.finished_at,
        "attempt": run.attempt,
        "usage": own,
        "usageRolledUp": rolled,
        "children": built,
    }
    if (why := wait_reason(stores, run, limits, children)) is not None:
        node["waitReason"] = why
    if run.error:
        node["error"] = {"code": run.error.get("code"), "message": run.error.get("message")}
    return node


def run_tree(stores: Stores, scope: Scope, run_id: str, *, limits: Mapping[str, int]) -> dict[str, Any]:
    """The run page: the run (seen by `scope`, else NotFound), its subtree, plan, source and journal tail.

    Raises:
        NotFound: no such run, or one the caller may not see.
    """
    run = scope.run(stores.runs.find(run_id), run_id)
    rows = [r for r in tree_rows(stores, run) if scope.sees(r)]
    kids: dict[str, list[RunRecord]] = {}
    for row in rows:
        if row.parent_run_id is not None:
            kids.setdefault(row.parent_run_id, []).append(row)
    tree = _node(stores, run, kids, limits)
    plan = run.plan or (stores.sessions.get_plan(run.session_id) if run.session_id else None)
    data: dict[str, Any] = {"run": tree, "rootRunId": run.root_run_id, "live": not run.terminal}
    if run.parent_run_id is not None and scope.sees(stores.runs.find(run.parent_run_id)):
        data["parentRunId"] = run.parent_run_id
    if plan:
        data["plan"] = plan
    if run.source_text is not None:
        data["source"] = {"text": run.source_text, "cid": run.source_cid}
    if run.output is not None:
        data["output"] = run.output
    data["journal"] = journal_tail(stores, [r for r in rows if r.kind == "workflow"])
    return data


def journal_tail(stores: Stores, scripts: list[RunRecord]) -> list[dict[str, Any]]:
    """The last entries of the tree's script journals, ordered across runs by when they were written."""
    if not scripts:
        return []
    marks = ", ".join("?" for _ in scripts)
    with stores.db.reading() as conn:
        rows = conn.execute(
            f"SELECT run_id, seq, entry_cbor, created_at FROM run_journal WHERE run_id IN ({marks}) "
            "ORDER BY created_at DESC, seq DESC LIMIT ?",
            [*(s.id for s in scripts), JOURNAL_TAIL],
        ).fetchall()
    return [{"runId": r[0], "seq": r[1], "at": r[3], "entry": cbor2.loads(r[2])} for r in reversed(rows)]


def root_runs_of_session(stores: Stores, scope: Scope, session_id: str, limit: int = 20) -> list[RunRecord]:
    """The session's runs, newest first (the ones the caller may see)."""
    with stores.db.reading() as conn:
        rows = conn.execute(
            "SELECT * FROM runs WHERE session_id = ? ORDER BY created_at DESC, id DESC LIMIT ?", (session_id, limit)
        ).fetchall()
    return [r for r in map(run_record, rows) if scope.sees(r)]


__all__ = ["JOURNAL_TAIL", "journal_tail", "root_runs_of_session", "run_tree", "tree_rows", "wait_reason"]
