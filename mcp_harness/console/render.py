"""HTML fragments for the Sessions, session and run pages, from the view data (`sessions.py`, `runs.py`).

Every value is escaped here and nowhere else. Times go out as `<time data-ms>` and elapsed spans as
`data-start`/`data-end`, which the page's script formats and ticks locally; the text inside is a fallback.
Disclosures carry a `data-key` so the script can keep them open across live updates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from mcp_harness.console import svg
from mcp_harness.spaces.threads import journal_line

PLAN_MARKS = {"pending": "○", "running": "◐", "done": "✓", "failed": "✕", "skipped": "–"}
OPEN_TOOL_CALLS_LIMIT = 6
"""Tool calls start open only when a session has this few (the reference's rule): more would bury the messages."""


def e(value: Any) -> str:
    return escape("" if value is None else str(value))


def when(ms: int | None) -> str:
    if ms is None:
        return "—"
    text = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f'<time data-ms="{int(ms)}">{text}</time>'


def pill(status: str) -> str:
    return f'<span class="pill" data-status="{e(status)}" style="--c:{svg.color(status)}">{e(status)}</span>'


def elapsed(start: int | None, end: int | None, now: int) -> str:
    if start is None:
        return '<span class="elapsed">not started</span>'
    stop = end if end is not None else now
    live = "" if end is not None else ' data-live="1"'
    return (
        f'<span class="elapsed" data-start="{start}" data-end="{end or ""}" data-now="{now}"{live}>'
        f"{(stop - start) / 1000:.1f} s</span>"
    )


def raw_json(value: Any, key: str) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return f'<details class="raw" data-key="{e(key)}"><summary>raw JSON</summary><pre>{e(text)}</pre></details>'


def tokens_line(usage: Mapping[str, Any]) -> str:
    parts = [f"{int(usage.get('total', 0))} tokens", f"in {int(usage.get('input', 0))}"]
    parts.append(f"out {int(usage.get('output', 0))}")
    if usage.get("cacheRead") or usage.get("cacheWrite"):
        parts.append(f"cache {int(usage.get('cacheRead', 0))}/{int(usage.get('cacheWrite', 0))}")
    if "cost" in usage:
        parts.append(f"${float(usage['cost']):.4f}")
    return f'<span class="tokens">{" · ".join(parts)}</span>'


# -- Sessions --------------------------------------------------------------------------------------------------


def session_list(data: Mapping[str, Any]) -> str:
    f = data["filters"]
    agents = "".join(
        f'<option value="{e(a["name"])}"{" selected" if f["agent"] in (a["id"], a["name"]) else ""}>'
        f"{e(a['name'])}</option>"
        for a in data["agents"]
    )
    statuses = "".join(
        f'<option value="{s}"{" selected" if f["status"] == s else ""}>{s}</option>' for s in data["statuses"]
    )
    form = (
        '<form class="filters" method="get" action="/sessions">'
        f'<select name="agent"><option value="">all agents</option>{agents}</select>'
        f'<select name="status"><option value="">any status</option>{statuses}</select>'
        f'<input type="search" name="q" placeholder="search titles and messages" value="{e(f["query"])}">'
        "<button>Filter</button></form>"
    )
    rows = []
    for s in data["sessions"]:
        snippet = f'<div class="snippet">{e(s["snippet"])}</div>' if s.get("snippet") else ""
        unanswered = f'<span class="warn">{s["unanswered"]}</span>' if s["unanswered"] else "0"
        parent = f'<a href="/sessions/{e(s["parentSessionId"])}">⤴</a>' if s["parentSessionId"] else ""
        rows.append(
            f'<tr data-session="{e(s["id"])}"><td><a href="/sessions/{e(s["id"])}">{e(s["title"] or "(untitled)")}</a>'
            f"{snippet}</td><td>{e(s['agent'])}</td><td>{pill(s['status'])}</td><td>{e(s['kind'])}</td>"
            f"<td>{parent}</td><td>{when(s['updatedAt'])}</td><td>{unanswered}</td></tr>"
        )
    body = "".join(rows) or '<tr><td colspan="7" class="empty">No sessions.</td></tr>'
    return (
        f'<h1>Sessions</h1>{form}<table class="list sessions"><thead><tr><th>title</th><th>agent</th>'
        "<th>status</th><th>kind</th><th>parent</th><th>updated</th><th>unanswered calls</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def plan_block(plan: Mapping[str, Any]) -> str:
    steps: Sequence[Mapping[str, Any]] = plan.get("steps", [])
    done = sum(1 for s in steps if s.get("status") == "done")
    items = []
    for s in steps:
        auto = (
            ' <span class="auto" title="Settled by the runtime from completed sub-agent results">auto</span>'
            if s.get("resolvedBy") == "runtime"
            else ""
        )
        items.append(
            f'<li data-step="{e(s.get("id"))}" data-status="{e(s.get("status"))}">'
            f'<span class="mark">{PLAN_MARKS.get(str(s.get("status")), "?")}</span> {e(s.get("label"))}{auto}</li>'
        )
    title = f"<h3>{e(plan['title'])}</h3>" if plan.get("title") else ""
    return (
        f'<section class="plan"><h2>Plan <small>{done} of {len(steps)} done</small></h2>{title}'
        f"{svg.plan_progress(steps)}<ul>{''.join(items)}</ul></section>"
    )


def _tool_item(item: Mapping[str, Any], open_all: bool) -> str:
    state = item.get("state", "pending")
    result = item.get("result") or {}
    brief = json.dumps(item.get("input"), ensure_ascii=False, default=str)
    summary = ""
    if "error" in result:
        summary = f'<span class="err">error: {e(str(result["error"])[:200])}</span>'
    elif isinstance(result.get("output"), dict) and result["output"].get("summary"):
        summary = e(str(result["output"]["summary"])[:200])
    elif state == "open":
        summary = "<i>waiting for its result</i>"
    key = f"tool-{item.get('callId')}"
    raw = raw_json({"call": {"name": item.get("name"), "input": item.get("input")}, "result": result}, f"raw-{key}")
    return (
        f'<details class="ev tool" data-state="{e(state)}" data-key="{e(key)}"{" open" if open_all else ""}>'
        f'<summary><span class="actor">{e(item["actor"])}</span> → <b>{e(item.get("name"))}</b> '
        f"<code>{e(brief[:120])}</code> ← {summary}</summary>{raw}</details>"
    )


def timeline(items: Sequence[Mapping[str, Any]], earlier: int) -> str:
    tools = sum(1 for i in items if i["type"] == "tool")
    out = [f'<p class="muted">{earlier} earlier events not shown.</p>'] if earlier else []
    for item in items:
        kind = item["type"]
        if kind == "message":
            out.append(
                f'<div class="ev msg" data-actor="{e(item["actor"])}"><span class="actor">{e(item["actor"])}</span>'
                f'<b>{e(item["role"])}</b> {when(item["at"])}<div class="text">{e(item["text"])}</div></div>'
            )
        elif kind == "tool":
            out.append(_tool_item(item, tools <= OPEN_TOOL_CALLS_LIMIT))
        elif kind == "error":
            out.append(f'<div class="ev error"><span class="actor">{e(item["actor"])}</span>⚠ {e(item["text"])}</div>')
        else:
            raw = raw_json(item.get("raw"), "raw-" + str(item["seq"]))
            out.append(f'<div class="ev other">{e(item["text"])}{raw}</div>')
    return f'<section class="timeline"><h2>Timeline</h2>{"".join(out) or "<p>No events yet.</p>"}</section>'


def session_page(data: Mapping[str, Any]) -> str:
    s = data["session"]
    up = f'<a class="up" href="/sessions/{e(data["parent"])}">⤴ parent</a> ' if data.get("parent") else ""
    head = (
        f'<h1>{up}{e(s["title"] or "(untitled)")}</h1><p class="meta">{e(s["agent"])} · {e(s["kind"])} · '
        f"updated {when(s['updatedAt'])} · {data['unanswered']} unanswered calls</p>"
    )
    if s.get("description"):
        head += f'<p class="desc">{e(s["description"])}</p>'
    side = []
    if data.get("plan"):
        side.append(plan_block(data["plan"]))
    if data["runs"]:
        runs = "".join(
            f'<li><a href="/runs/{e(r["id"])}">{e(r["title"])}</a> {pill(r["status"])}</li>' for r in data["runs"]
        )
        side.append(f'<section class="runs"><h2>Runs</h2><ul>{runs}</ul></section>')
    if data["children"]:
        kids = "".join(
            f'<li><a href="/sessions/{e(c["id"])}">{e(c["title"] or "(untitled)")}</a> {pill(c["status"])}</li>'
            for c in data["children"]
        )
        side.append(f'<section class="children"><h2>Child sessions</h2><ul>{kids}</ul></section>')
    if data["memoryChanges"]:
        changes = "".join(
            f"<li><code>{e(m['address'])}</code> <small>#{m['seq']} {e(m['state'])}</small></li>"
            for m in data["memoryChanges"]
        )
        side.append(f'<section class="memory-changes"><h2>Memory changes</h2><ul>{changes}</ul></section>')
    return (
        f'{head}<div class="cols"><div class="main">{timeline(data["timeline"], data["earlier"])}</div>'
        f"<aside>{''.join(side)}</aside></div>"
    )


# -- Runs ------------------------------------------------------------------------------------------------------


def _nodes(node: Mapping[str, Any], now: int) -> str:
    why = f'<div class="wait">{e(node["waitReason"])}</div>' if node.get("waitReason") else ""
    err = node.get("error")
    error = f'<div class="err">{e(err.get("code"))}: {e(err.get("message"))}</div>' if err else ""
    kids = "".join(_nodes(c, now) for c in node["children"])
    session = f' · <a href="/sessions/{e(node["sessionId"])}">session</a>' if node.get("sessionId") else ""
    return (
        f'<li class="node" data-run="{e(node["id"])}" data-status="{e(node["status"])}">'
        f'<a href="/runs/{e(node["id"])}">{e(node["title"])}</a> {pill(node["status"])} '
        f"{elapsed(node['startedAt'], node['finishedAt'], now)} · {tokens_line(node['usageRolledUp'])}"
        f"{session}{why}{error}{'<ul>' + kids + '</ul>' if kids else ''}</li>"
    )


def run_page(data: Mapping[str, Any], now: int, *, can_cancel: bool) -> str:
    run = data["run"]
    links = []
    if data.get("parentRunId"):
        links.append(f'<a href="/runs/{e(data["parentRunId"])}">⤴ parent run</a>')
    if data["rootRunId"] != run["id"]:
        links.append(f'<a href="/runs/{e(data["rootRunId"])}">root</a>')
    cancel = (
        f'<button class="cancel" data-cancel="{e(run["id"])}">Cancel run and its children</button>'
        if can_cancel and data["live"]
        else ""
    )
    head = (
        f'<div class="run-card" data-run="{e(run["id"])}" data-status="{e(run["status"])}">'
        f"<h1>{e(run['title'])} {pill(run['status'])}</h1>"
        f'<p class="meta">{e(run["kind"])} · attempt {run["attempt"]} · '
        f"{elapsed(run['startedAt'], run['finishedAt'], now)} · "
        f'<span class="rolled" data-total="{int(run["usageRolledUp"]["total"])}">'
        f"{tokens_line(run['usageRolledUp'])}</span> (own: {tokens_line(run['usage'])}) {' '.join(links)}</p>{cancel}"
    )
    if run.get("waitReason"):
        head += f'<div class="banner wait">{e(run["waitReason"])}</div>'
    if run.get("error"):
        head += f'<div class="banner err">{e(run["error"]["code"])}: {e(run["error"]["message"])}</div>'
    parts = [head + "</div>"]
    if data.get("plan"):
        parts.append(plan_block(data["plan"]))
    parts.append(f'<section class="tree"><h2>Run tree</h2>{svg.run_tree(run)}<ul class="nodes">{_nodes(run, now)}</ul>')
    parts.append("</section>")
    if run["children"]:
        parts.append(f'<section class="gantt"><h2>Timeline</h2>{svg.gantt(run, now)}</section>')
        usage = [(c["title"], c["usageRolledUp"]) for c in run["children"]]
        parts.append(f'<section class="usage"><h2>Tokens per child</h2>{svg.usage_bars(usage)}</section>')
    if data["journal"]:
        lines = "".join(
            f'<li data-level="{e(j["entry"].get("level", ""))}">{e(journal_line(j["entry"]))}'
            + raw_json(j["entry"], f"journal-{j['runId']}-{j['seq']}")
            + "</li>"
            for j in data["journal"]
        )
        parts.append(
            f'<details class="activity" data-key="activity" open><summary>Activity ({len(data["journal"])} '
            f'journal entries)</summary><ol class="journal">{lines}</ol></details>'
        )
    if data.get("source"):
        parts.append(
            f'<details class="code" data-key="code"><summary>Code <small>{e(data["source"].get("cid"))}</small>'
            f"</summary><pre>{e(data['source']['text'])}</pre></details>"
        )
    if "output" in data:
        parts.append(f'<section class="output"><h2>Output</h2>{raw_json(data["output"], "output")}</section>')
    return "".join(parts)


def query_string(params: Mapping[str, str]) -> str:
    kept = {k: v for k, v in params.items() if v}
    return "?" + urlencode(kept) if kept else ""


__all__ = ["e", "elapsed", "pill", "plan_block", "run_page", "session_list", "session_page", "timeline", "when"]
