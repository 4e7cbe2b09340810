"""Which page a console path is: its title, its data (what the JSON route returns and what a live stream compares)
and how it renders. One table, so the HTML, JSON and SSE routes can never disagree about a page.

Data never depends on the clock (elapsed times are computed when rendering), so two reads of an unchanged tree
give equal data and a live stream sends nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from mcp_harness.console import catalog, documents, render, render_catalog, runs, sessions, triggers
from mcp_harness.errors import NotFound
from mcp_harness.scope import Scope
from mcp_harness.store.run_claims import run_record

RUN_LIST_LIMIT = 100


@dataclass(frozen=True, slots=True)
class View:
    title: str
    data: dict[str, Any]
    render: Callable[[int], str]
    """The page's HTML fragment at `now` (ms)."""

    @property
    def version(self) -> str:
        """A digest of the data: equal data, equal version (a live stream sends only a new version)."""
        blob = json.dumps(self.data, sort_keys=True, default=str, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:20]


def run_list(directory: catalog.Directory, scope: Scope) -> dict[str, Any]:
    """Root runs, newest first."""
    sql = "SELECT * FROM runs WHERE account_id = ? AND parent_run_id IS NULL"
    args: list[Any] = [scope.account_id]
    if scope.agent_id is not None:
        sql += " AND agent_id = ?"
        args.append(scope.agent_id)
    with directory.db.reading() as conn:
        rows = conn.execute(sql + " ORDER BY created_at DESC, id DESC LIMIT ?", [*args, RUN_LIST_LIMIT]).fetchall()
    names = sessions.agent_names(directory, scope)
    found = [r for r in map(run_record, rows) if scope.sees(r)]
    return {
        "runs": [
            {
                "id": r.id,
                "title": r.title,
                "kind": r.kind,
                "status": r.status,
                "agent": names.get(r.agent_id or "", r.agent_id),
                "createdAt": r.created_at,
            }
            for r in found
        ]
    }


def view(
    directory: catalog.Directory,
    scope: Scope,
    path: str,
    params: Mapping[str, str],
    *,
    limits: Mapping[str, int],
) -> View:
    """The page at `path` (with its query `params`) as `scope` sees it.

    Raises:
        NotFound: no such page, or it names something the caller may not see.
        BadRequest: a malformed parameter.
    """
    path = "/" + path.strip("/")
    if path in ("/", "/sessions"):
        data = sessions.session_rows(
            directory, scope, agent=params.get("agent"), status=params.get("status"), query=params.get("q")
        )
        return View("Sessions", data, lambda now: render.session_list(data))
    if m := re.fullmatch(r"/sessions/([^/]+)", path):
        data = sessions.session_view(directory, scope, m[1])
        title = data["session"]["title"] or "Session"
        return View(title, data, lambda now: render.session_page(data))
    if path == "/runs":
        data = run_list(directory, scope)
        return View("Runs", data, lambda now: render_catalog.run_list(data))
    if m := re.fullmatch(r"/runs/([^/]+)", path):
        data = runs.run_tree(directory, scope, m[1], limits=limits)
        return View(data["run"]["title"], data, lambda now: render.run_page(data, now, can_cancel=True))
    if path == "/agents":
        data = catalog.agent_list(directory, scope)
        return View("Agents", data, lambda now: render_catalog.agent_list(data))
    if m := re.fullmatch(r"/agents/([^/]+)", path):
        data = catalog.agent_view(directory, scope, m[1])
        return View(data["agent"]["name"], data, lambda now: render_catalog.agent_page(data))
    if m := re.fullmatch(r"/agents/([^/]+)/memory", path):
        data = catalog.memory_view(directory, scope, m[1], params.get("path", ""))
        return View(f"{data['agent']['name']} memory", data, lambda now: render_catalog.memory_page(data))
    if path == "/triggers":
        data = triggers.trigger_rows(directory, scope)
        return View("Triggers", data, lambda now: render_catalog.trigger_list(data))
    if path == "/documents":
        node = cast("documents.HasNode", directory)  # the composition root's Directory holds the node
        data = documents.account_list(node, scope, params.get("after"))
        return View("Documents", data, lambda now: documents.render_accounts(data))
    if m := re.fullmatch(r"/documents/([^/]+)", path):
        data = documents.document_view(cast("documents.HasNode", directory), scope, m[1], params)
        title = (data.get("document") or {}).get("name") or data["path"] or data["name"] or "Documents"
        return View(title, data, lambda now: documents.render_document(data))
    raise NotFound(f"No console page {path}. The pages: /sessions, /runs, /agents, /triggers, /documents.")


__all__ = ["View", "run_list", "view"]
