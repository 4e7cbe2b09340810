"""Reading conversations and runs: `thread:` (this account's conversations), `thread:<id>` (one transcript) and
`run:<id>` (a run's record), HARNESS §11.2. The spaces are declared in thread.py and run.py; the CLI renders
transcripts and journals with the helpers here too."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mcp_harness import cursors
from mcp_harness.errors import BadRequest
from mcp_harness.scope import Owner
from mcp_harness.store._util import now_ms
from mcp_harness.store.sessions import EventRecord, SessionRecord
from mcp_harness.verbs.base import VerbContext, VerbResult

if TYPE_CHECKING:
    from mcp_harness.runs.records import RunRecord

THREAD_EVENT_WINDOW = 200
MAX_TRANSCRIPT_CHARS = 262_144
MAX_THREAD_LIMIT = 100
LISTING_OPTIONS = ("query", "agentId", "limit", "cursor")


def _after(cursor: object, searching: bool) -> tuple[int, str] | None:
    """Where a `thread:` page starts: after the (updatedAt, id) its cursor names; 400 for anything else."""
    if cursor is None:
        return None
    if searching:
        raise BadRequest("thread: option cursor pages the listing; a query returns its best matches up to limit.")
    after = cursors.decode_keyset(cursor)
    if after is None:
        raise BadRequest(
            f"thread: option cursor must be the nextCursor of an earlier page of thread:; got {json.dumps(cursor)}."
        )
    return after


def list_threads(ctx: VerbContext, options: dict[str, Any], fmt: str) -> VerbResult:
    """`thread:`: the conversations the caller may see (`scope.py`), newest first, or those matching a query."""
    unknown = sorted(set(options) - set(LISTING_OPTIONS))
    if unknown:
        raise BadRequest(
            f"thread: does not understand option(s) {', '.join(unknown)}. Supported: {', '.join(LISTING_OPTIONS)}."
        )
    limit = cursors.page_limit(options, "thread:", 25, MAX_THREAD_LIMIT)
    agent_id = options.get("agentId")
    if agent_id is not None and not isinstance(agent_id, str):
        raise BadRequest("thread: option agentId must be a string (an agent id).")
    query = options.get("query")
    if query is not None and not isinstance(query, str):
        raise BadRequest("thread: option query must be a string.")
    searching = bool(query and query.strip())
    after = _after(options.get("cursor"), searching)
    sessions = ctx.services.sessions
    scope = ctx.scope
    account = scope.account_id
    wanted = scope.agent_filter(agent_id or None)
    more, total = False, None
    if scope.confined and agent_id and agent_id != scope.agent_id:
        found: list[tuple[SessionRecord, str | None]] = []  # another agent's threads: as if it had none
        total = 0
    elif searching:
        found = sessions.search(account, query or "", agent_id=wanted, limit=limit)
    else:
        page = sessions.list(account, agent_id=wanted, limit=limit + 1, after=after)
        more = len(page) > limit
        found = [(s, None) for s in page[:limit]]
        total = sessions.count(account, agent_id=wanted)
    names = {a.id: a.definition.name for a in ctx.services.agents.list(account)}
    entries = [_entry(s, snippet, names) for s, snippet in found if scope.sees(s)]
    summary = f"Found {len(entries)} thread{'s' if len(entries) != 1 else ''}"
    summary += f' matching "{(query or "").strip()}".' if searching else ", newest first."
    data: dict[str, Any] = {"summary": summary, "threads": entries}
    if total is not None:
        data["totalThreads"] = total
    if more:
        last = found[-1][0]
        data["nextCursor"] = cursors.encode_keyset(last.updated_at, last.id)
        data["summary"] = f"{summary[:-1]}; more remain: pass options.cursor for the next page."
    lines = [
        f"- {e['thread']} — {e.get('title') or '(untitled)'} · {e['agent']} · {e['status']}"
        + (f"\n  {e['snippet']}" if e.get("snippet") else "")
        for e in entries
    ]
    return VerbResult.of(data, "\n".join(lines) or None, fmt=fmt)


def _entry(s: SessionRecord, snippet: str | None, names: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"thread": f"thread:{s.id}"}
    if s.title:
        out["title"] = s.title
    if s.description:
        out["description"] = s.description
    out.update({"agent": names.get(s.agent_id, s.agent_id), "agentId": s.agent_id, "status": s.status})
    if s.parent_session_id:
        out["parentThread"] = f"thread:{s.parent_session_id}"
    out["updatedAt"] = s.updated_at
    if snippet:
        out["snippet"] = snippet
    return out


def render_event(event: EventRecord) -> str:
    """One event as a transcript line (also used by `mcp-harness log` and `chat`)."""
    p = event.payload
    match event.type:
        case "message":
            return f"**{p.get('role', 'user')}**: {p.get('content', '')}"
        case "tool_call":
            return f"→ tool call {p.get('name')} {json.dumps(p.get('input'), ensure_ascii=False)}"
        case "tool_result":
            if "error" in p:
                return f"← tool result {p.get('name')} (error: {p['error']})"
            output = p.get("output")
            summary = output.get("summary") if isinstance(output, dict) else None
            if summary is None and isinstance(output, dict):
                summary = _child_summary(output)  # pyright: ignore[reportUnknownArgumentType]
            return f"← tool result {p.get('name')}" + (f": {summary}" if summary else "")
        case "error":
            return f"⚠ error: {p.get('message')}"
        case other:
            return f"({other})"


def _child_summary(output: dict[str, Any]) -> str | None:
    """A delegate result (`{status, runId, error?}`) carries no summary; without this line a child that failed
    showed nothing of why."""
    status, run_id = output.get("status"), output.get("runId")
    if not isinstance(status, str) or not isinstance(run_id, str):
        return None
    error = output.get("error")
    if status == "failed" and isinstance(error, dict):
        return f"run {run_id} failed ({error.get('code')}): {error.get('message')}"
    return f"run {run_id} {run_phrase(status)}"


def run_phrase(status: str, error: dict[str, Any] | None = None, attempts: int = 0) -> str:
    """A run's status as a predicate: "succeeded", "failed after 3 attempts (code): message", "is running"."""
    if status in ("succeeded", "canceled"):
        return "was canceled" if status == "canceled" else "succeeded"
    if status == "failed":
        # `attempt` counts every claim, resumes after a park included: only a retryable error says it was retried.
        tries = f" after {attempts} attempts" if attempts > 1 and error and error.get("retryable") else ""
        reason = f" ({error.get('code')}): {error.get('message')}" if error else ""
        return f"failed{tries}{reason}"
    return {"claimed": "is starting", "waiting": "is waiting"}.get(status, f"is {status}")


JOURNAL_TAIL = 20


def journal_line(entry: dict[str, Any]) -> str:
    """One script journal entry as a line: `ctx.log` lines verbatim, calls and results in brief."""
    seq, kind = entry.get("callSeq"), entry.get("kind")
    match kind:
        case "log":
            data = f" {json.dumps(entry['data'], ensure_ascii=False)}" if entry.get("data") is not None else ""
            return f"#{seq} log {entry.get('level')}: {entry.get('message')}{data}"
        case "call":
            what = entry.get("tool") if entry.get("op") == "tool" else "delegate"
            return f"#{seq} call {what} {json.dumps(entry.get('input'), ensure_ascii=False)[:200]}"
        case "result":
            error = entry.get("error")
            if entry.get("status") == "ok" or not isinstance(error, dict):
                return f"#{seq} result ok"
            return f"#{seq} result error ({error.get('code')}): {error.get('message')}"
        case "step":
            return f"#{seq} step {entry.get('label')}"
        case _:
            return f"#{seq} {kind}"


def child_threads(ctx: VerbContext, session_id: str) -> list[dict[str, Any]]:
    """Sessions started from this one that the caller may see, with the run that owns each and its status."""
    with ctx.services.db.reading() as conn:
        rows = conn.execute(
            "SELECT s.id, s.title, s.run_id, s.account_id, s.agent_id, r.status FROM sessions s "
            "LEFT JOIN runs r ON r.id = s.run_id WHERE s.parent_session_id = ? ORDER BY s.created_at",
            (session_id,),
        ).fetchall()
    out: list[dict[str, Any]] = []
    for row in rows:
        if not ctx.scope.sees(Owner(row["account_id"], row["agent_id"])):
            continue
        entry: dict[str, Any] = {"thread": f"thread:{row['id']}", "title": row["title"]}
        if row["run_id"]:
            entry["runId"], entry["runStatus"] = row["run_id"], row["status"]
        out.append(entry)
    return out


def read_run(ctx: VerbContext, run_id: str, fmt: str) -> VerbResult:
    """`run:<id>`: the run's public record — status, wait, usage, plan, children (with a failed one's error), error,
    output, and for a script the tail of its `ctx.log` lines."""
    run = ctx.scope.run(ctx.services.runs.find(run_id), run_id)
    info = run.to_info()
    children = [c for c in ctx.services.runs.children(run.id) if ctx.scope.sees(c)]
    info["children"] = [
        {"id": c.id, "status": c.status, "title": c.title, "sessionId": c.session_id}
        | ({"error": {"code": c.error.get("code"), "message": c.error.get("message")}} if c.error else {})
        for c in children
    ]
    phrase = run_phrase(run.status, run.error, run.attempt)
    data = {"summary": f"Run {run.id} ({run.kind}) {phrase}.", **info}
    if run.source_text is not None:
        data["sourceText"] = run.source_text
    journal = ctx.services.runs.journal(run.id) if run.kind == "workflow" else []
    logs = [e for e in journal if e.get("kind") == "log"]
    if logs:
        data["log"] = [
            {k: e[k] for k in ("callSeq", "level", "message", "data") if k in e} for e in logs[-JOURNAL_TAIL:]
        ]
    lines = [f"- status: {run.status}", f"- title: {run.title}"]
    if run.status == "queued":
        data["queuePlace"], why = _queue_place(ctx, run)
        lines.append(f"- waiting: {why}")
    if run.wait:
        lines.append(f"- waiting: {json.dumps(info.get('wait'), ensure_ascii=False)}")
    if run.usage:
        lines.append(f"- usage: {json.dumps(run.usage)}")
    if run.error:
        lines.append(f"- error: {run.error.get('code')}: {run.error.get('message')}")
    if run.status == "succeeded":
        lines.append(f"- output: {json.dumps(run.output, ensure_ascii=False)[:2000]}")
    for child in info["children"]:
        why = f" — {child['error']['code']}: {child['error']['message']}" if child.get("error") else ""
        lines.append(f"- child {child['id']} ({child['status']}): {child['title']}{why}")
    if logs:
        shown = logs[-JOURNAL_TAIL:]
        lines.append(f"- ctx.log (last {len(shown)} of {len(logs)}):")
        lines += [f"  {journal_line(e)}" for e in shown]
    if run.source_text is not None:
        lines.append(f"\n```python\n{run.source_text}\n```")
    return VerbResult.of(data, "\n".join(lines), fmt=fmt)


def _queue_place(ctx: VerbContext, run: RunRecord) -> tuple[dict[str, Any], str]:
    """Why a queued run waits: its retry's time, its session's live turn, or the engine's limit on live runs."""
    live, ahead, session_busy = ctx.services.runs.queue_place(run)
    limit = ctx.services.engine.limits.get(run.kind)
    place: dict[str, Any] = {"ahead": ahead, "live": live, "limit": limit}
    if run.not_before is not None and run.not_before > now_ms():
        return place | {"reason": "not-before"}, f"queued until {run.not_before} (a retry's backoff)"
    if session_busy:
        return place | {"reason": "session"}, "queued behind its session's current turn (one turn at a time)"
    if limit is not None and live >= limit:
        behind = live + ahead
        return place | {"reason": "limit"}, (
            f"queued behind {behind} run{'s' if behind != 1 else ''} ({live} live, {ahead} queued before it): at "
            f"most {limit} {run.kind} runs run at once ([runs] max_{run.kind}_runs)"
        )
    return place | {"reason": "next-pass"}, f"queued ({ahead} before it); it starts on the engine's next pass"


def read_thread(ctx: VerbContext, session_id: str, fmt: str) -> VerbResult:
    session = ctx.scope.session(ctx.services.sessions.find(session_id), session_id)
    events = ctx.services.sessions.events(session_id, last=THREAD_EVENT_WINDOW)
    markdown = "\n\n".join(f"[{e.seq}] {e.actor}: {render_event(e)}" for e in events)
    if len(markdown) > MAX_TRANSCRIPT_CHARS:
        markdown = "[earlier events truncated]\n\n" + markdown[-MAX_TRANSCRIPT_CHARS:]
    plural = "s" if len(events) != 1 else ""
    data: dict[str, Any] = {
        "summary": f'Thread "{session.title or session.id}": {len(events)} recent event{plural}.',
        "sessionId": session.id,
        "title": session.title,
    }
    if session.description:
        data["description"] = session.description
    children = child_threads(ctx, session.id)
    if children:
        data["children"] = children
        markdown += "\n\n## Child sessions\n\n" + "\n".join(
            f"- {c['thread']} — {c['title'] or '(untitled)'}"
            + (f" · run {c['runId']} {c['runStatus']}" if "runId" in c else "")
            for c in children
        )
    data["markdown"] = markdown
    if fmt == "json":
        data["events"] = [
            {"seq": e.seq, "type": e.type, "actor": e.actor, "createdAt": e.created_at, **e.payload} for e in events
        ]
    return VerbResult.of(data, markdown or "(no events yet)", fmt=fmt)
