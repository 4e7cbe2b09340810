"""HTML fragments for the Agents, agent, memory and triggers pages (see `render.py` for the conventions)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from mcp_harness.console.render import e, pill, raw_json, when


def agent_list(data: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<tr data-agent="{e(a["id"])}"><td><a href="/agents/{e(a["id"])}">{e(a["name"])}</a></td>'
        f"<td>{e(a['provider'])}</td><td>{e(a['model'])}</td>"
        f'<td><a href="/sessions?agent={quote(a["name"])}">{a["sessions"]}</a></td><td>{when(a["updatedAt"])}</td></tr>'
        for a in data["agents"]
    )
    return (
        '<h1>Agents</h1><table class="list agents"><thead><tr><th>name</th><th>provider</th><th>model</th>'
        f"<th>sessions</th><th>updated</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _tool(tool: Mapping[str, Any]) -> str:
    source = f"<pre>{e(tool['source'])}</pre>" if tool.get("source") else ""
    contract = raw_json({"input": tool["input"], "output": tool.get("output")}, f"contract-{tool['name']}")
    state = "" if tool["enabled"] else ' <span class="muted">(disabled)</span>'
    return (
        f'<details class="tool-doc" data-key="tool-{e(tool["name"])}"><summary><b>{e(tool["name"])}</b> '
        f'<small>{e(tool["kind"])}</small>{state} — {e(tool["summary"])} <code class="cid">{e(tool["cid"])}</code>'
        f"</summary>{contract}{source}</details>"
    )


def agent_page(data: Mapping[str, Any]) -> str:
    a, d = data["agent"], data["definition"]
    prompt = d.get("systemPrompt")
    prompt_text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False, indent=2)
    grants = data["grants"]
    providers = "".join(
        f"<tr><td>{e(p['name'])}{' ★' if p['name'] == d.get('modelProvider') else ''}</td><td>{e(p['type'])}</td>"
        f"<td>{e(p['source'])}</td><td>{e(p.get('model'))}</td><td>{e(p.get('key'))}</td></tr>"
        for p in data["providers"]
    )
    identities = "".join(
        f"<li><b>{e(i['label'])}</b> <code>{e(i['accountId'])}</code> <small>({e(i['name'])})</small></li>"
        for i in data["identities"]
    )
    tools = "".join(_tool(t) for t in data["tools"])
    callables = ", ".join(e(c) for c in grants.get("callableTools", [])) or "none"
    return (
        f'<h1>{e(a["name"])}</h1><p class="meta">{e(a["status"])} · updated {when(a["updatedAt"])} · '
        f'<a href="/sessions?agent={quote(a["name"])}">sessions</a> · '
        f'<a href="/agents/{e(a["id"])}/memory">memory</a></p>'
        f"<section><h2>Definition</h2><p>provider <b>{e(d.get('modelProvider'))}</b>, model <b>{e(d.get('model'))}</b>"
        f'</p><details data-key="prompt"><summary>system prompt</summary><pre>{e(prompt_text)}</pre></details>'
        f"{raw_json(d, 'definition')}</section>"
        f"<section><h2>Grants</h2><p>callable tools: {callables} · publish: {'yes' if grants.get('publish') else 'no'}"
        f"</p></section>"
        f'<section><h2>Providers</h2><table class="list"><thead><tr><th>name</th><th>type</th><th>source</th>'
        f"<th>model</th><th>key</th></tr></thead><tbody>{providers}</tbody></table></section>"
        f"<section><h2>Identities</h2><ul>{identities or '<li>none</li>'}</ul></section>"
        f"<section><h2>Tools</h2>{tools or '<p>No tools.</p>'}</section>"
    )


def memory_page(data: Mapping[str, Any]) -> str:
    agent, path = data["agent"], data["path"]
    base = f"/agents/{e(agent['id'])}/memory"
    crumbs = [f'<a href="{base}">~/memory</a>']
    walked = ""
    for part in [p for p in path.split("/") if p]:
        walked = f"{walked}/{part}" if walked else part
        crumbs.append(f'<a href="{base}?path={quote(walked)}">{e(part)}</a>')
    head = f"<h1>{e(agent['name'])}: {' / '.join(crumbs)}</h1>"
    if "file" in data:
        f = data["file"]
        download = (
            f'<a class="download" data-download="/api/agents/{e(agent["id"])}/memory/raw?path={quote(f["path"])}" '
            f'href="#">download ({f["size"]} bytes)</a>'
        )
        body = f'<pre class="file">{e(f["text"])}</pre>' if "text" in f else "<p>Binary or large file.</p>"
        return f"{head}<p>{e(f.get('mimeType'))} · {download}</p>{body}"
    rows = "".join(
        f'<tr><td><a href="{base}?path={quote(x["path"])}">{e(x["path"].rsplit("/", 1)[-1])}'
        f"{'/' if x['type'] == 'dir' else ''}</a></td><td>{e(x['type'])}</td><td>{x['size']}</td>"
        f"<td>{when(x['updatedAt'])}</td></tr>"
        for x in data["entries"]
    )
    return (
        f'{head}<table class="list memory"><thead><tr><th>name</th><th>type</th><th>bytes</th><th>updated</th></tr>'
        f"</thead><tbody>{rows or '<tr><td colspan=4>Empty.</td></tr>'}</tbody></table>"
    )


def run_list(data: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<tr data-run="{e(r["id"])}"><td><a href="/runs/{e(r["id"])}">{e(r["title"])}</a></td><td>{e(r["kind"])}</td>'
        f"<td>{pill(r['status'])}</td><td>{e(r.get('agent'))}</td><td>{when(r['createdAt'])}</td></tr>"
        for r in data["runs"]
    )
    return (
        '<h1>Runs</h1><table class="list runs"><thead><tr><th>title</th><th>kind</th><th>status</th><th>agent</th>'
        f"<th>created</th></tr></thead><tbody>{rows or '<tr><td colspan=5>No runs.</td></tr>'}</tbody></table>"
    )


__all__ = ["agent_list", "agent_page", "memory_page", "run_list"]


def trigger_list(data: Mapping[str, Any]) -> str:
    blocks = []
    for t in data["triggers"]:
        firings = "".join(
            f"<li>{pill(f['status'])} {when(f['firedAt'])} "
            + (f'<a href="/sessions/{e(f["sessionId"])}">session</a> ' if f["sessionId"] else "")
            + (f'<a href="/runs/{e(f["runId"])}">run</a> ' if f["runId"] else "")
            + e(f["summary"] or f["error"] or "")
            + "</li>"
            for f in t["firings"]
        )
        state = "enabled" if t["enabled"] else "disabled"
        due = f" · next due {when(t['nextDueAt'])}" if t["nextDueAt"] else ""
        error = f'<div class="err">{e(t["lastError"])}</div>' if t["lastError"] else ""
        blocks.append(
            f'<section class="trigger" data-trigger="{e(t["id"])}"><h2>{e(t["agent"])} / {e(t["name"])} '
            f"<small>{e(t['source'].get('type'))} · {state}{due}</small></h2>{error}"
            f'<details data-key="trigger-{e(t["id"])}"><summary>prompt and source</summary><pre>{e(t["prompt"])}'
            f"</pre>{raw_json(t['source'], 'source-' + str(t['id']))}</details>"
            f"<ul>{firings or '<li>No firings yet.</li>'}</ul></section>"
        )
    return "<h1>Triggers</h1>" + ("".join(blocks) or "<p>No triggers.</p>")
