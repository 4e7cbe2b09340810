"""`mcp-harness sessions` and `log`: the owner's view of conversations, newest first, and one session's events.

`log --follow` polls the database, so it shows what a `serve` (or `chat`) in another process appends as it
happens. After the events come what a transcript alone does not say: the log lines of the scripts the session
started, and how the session's latest run ended when it did not succeed (a child that failed in its model call
leaves nothing but its brief in its own log).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from mcp_harness.cli import run_queries
from mcp_harness.cli._common import command_flags, emit, fmt_time, opened
from mcp_harness.errors import NotFound

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.store.sessions import EventRecord, SessionRecord

FOLLOW_POLL_S = 0.25
"""How often `log --follow` looks for new events: a database read, cheap enough to feel live."""


def register(sub: Any) -> None:
    sessions = sub.add_parser(
        "sessions",
        help="list sessions, newest first",
        description="One session per line: id, agent, kind (conversation, standing, child, detached child), "
        "run id (a child's), updated, title.",
    )
    sessions.set_defaults(handler=_sessions_command)
    command_flags(sessions)
    sessions.add_argument("--agent", help="only this agent's sessions")
    sessions.add_argument("--limit", type=int, default=25)

    log = sub.add_parser("log", help="print a session's event log, one line per event, actor first")
    log.set_defaults(handler=_log_command)
    command_flags(log)
    log.add_argument("session", help="session id")
    log.add_argument("--follow", "-f", action="store_true", help="keep printing new events (stop with Ctrl-C)")
    log.add_argument(
        "--until-idle",
        action="store_true",
        help="with --follow: stop once no run of the session (or script it started) is queued, running or waiting",
    )


def kind_of(session: SessionRecord) -> str:
    """What the session is to its owner: a detached child is stored as a conversation with a parent."""
    if session.kind == "conversation" and session.parent_session_id is not None:
        return "detached child"
    return session.kind


def _sessions_command(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        agent_id = None
        if args.agent:
            found = harness.agents.find(harness.account_id, args.agent)
            if found is None:
                raise NotFound(f"No agent named {args.agent!r}. `mcp-harness agent list` shows them.")
            agent_id = found.id
        names = {a.id: a.definition.name for a in harness.agents.list(harness.account_id)}
        records = harness.sessions.list(harness.account_id, agent_id=agent_id, limit=max(1, args.limit))
    rows = [
        {
            "id": s.id,
            "agent": names.get(s.agent_id),
            "kind": kind_of(s),
            "title": s.title,
            "parentSessionId": s.parent_session_id,
            "runId": s.run_id,
            "updatedAt": s.updated_at,
        }
        for s in records
    ]
    lines = [
        f"{s.id}\t{names.get(s.agent_id, s.agent_id)}\t{kind_of(s)}\t{s.run_id or '-'}\t{fmt_time(s.updated_at)}\t"
        f"{s.title or ''}"
        for s in records
    ]
    return emit(out, args, rows, "\n".join(lines) or "No sessions yet.")


def event_row(event: EventRecord) -> dict[str, Any]:
    return {"seq": event.seq, "actor": event.actor, "createdAt": event.created_at, **event.payload}


def event_line(event: EventRecord) -> str:
    from mcp_harness.spaces.threads import render_event

    return f"{event.actor}\t{event.seq}\t{fmt_time(event.created_at)}\t{render_event(event)}"


def events_after(harness: Harness, session_id: str, seq: int) -> list[EventRecord]:
    """The session's events with a higher `seq`."""
    return harness.sessions.events(session_id, after=seq)


def _log_command(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        session = harness.sessions.get(args.session)
        events = harness.sessions.events(session.id)
        shown = list(events)
        if not args.json:
            for event in events:
                print(event_line(event), file=out)
        code = 0
        if args.follow:
            try:
                _follow(harness, args, out, shown)
            except KeyboardInterrupt:
                code = 130  # the way to stop --follow: what was shown stands, the footer still follows
        if args.json:
            emit(out, args, [event_row(e) for e in shown], None)
        else:
            for line in footer(harness, session.id):
                print(line, file=out)
    return code


def _follow(harness: Harness, args: argparse.Namespace, out: Any, shown: list[EventRecord]) -> None:
    while True:
        # Idle is read before the events: whatever a run appended before it went terminal is printed below.
        idle = args.until_idle and run_queries.session_idle(harness, args.session)
        new = events_after(harness, args.session, shown[-1].seq if shown else 0)
        shown += new
        if not args.json:
            for event in new:
                print(event_line(event), file=out)
            out.flush()
        if idle:
            return
        time.sleep(FOLLOW_POLL_S)


def footer(harness: Harness, session_id: str) -> list[str]:
    """Lines after a session's events: each script's `ctx.log` lines, and the latest run's end unless it
    succeeded (its error: after three provider 500s, the transcript shows only the brief)."""
    from mcp_harness.spaces.threads import journal_line, run_phrase

    lines: list[str] = []
    for script in run_queries.script_runs_of(harness, session_id):
        for entry in harness.runs.journal(script.id):
            if entry.get("kind") == "log":
                lines.append(f"script\t{script.id}\t-\t{journal_line(entry)}")
    runs = run_queries.list_runs(harness, session_id=session_id, limit=50)
    run = next((r for r in runs if r.kind == "agent"), None)
    if run is not None and run.status != "succeeded":
        phrase = run_phrase(run.status, run.error, run.attempt)
        if run.error and not run.terminal:  # a retry is due: say what the last attempt ran into
            phrase += (
                f" (attempt {run.attempt} of {run.max_attempts}: {run.error.get('code')}: {run.error.get('message')})"
            )
        lines.append(f"run\t{run.id}\t{fmt_time(run.updated_at)}\t{phrase}")
    return lines
