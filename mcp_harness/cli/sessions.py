"""`mcp-harness sessions` and `log`: the owner's view of conversations, newest first, and one session's events."""

from __future__ import annotations

import argparse
from typing import Any

from mcp_harness.cli._common import command_flags, emit, fmt_time, opened
from mcp_harness.errors import NotFound


def register(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="list sessions, newest first")
    sessions.set_defaults(handler=_sessions_command)
    command_flags(sessions)
    sessions.add_argument("--agent", help="only this agent's sessions")
    sessions.add_argument("--limit", type=int, default=25)

    log = sub.add_parser("log", help="print a session's event log, one line per event, actor first")
    log.set_defaults(handler=_log_command)
    command_flags(log)
    log.add_argument("session", help="session id")


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
        {"id": s.id, "agent": names.get(s.agent_id), "kind": s.kind, "title": s.title, "updatedAt": s.updated_at}
        for s in records
    ]
    lines = [
        f"{s.id}\t{names.get(s.agent_id, s.agent_id)}\t{s.kind}\t{fmt_time(s.updated_at)}\t{s.title or ''}"
        for s in records
    ]
    return emit(out, args, rows, "\n".join(lines) or "No sessions yet.")


def _log_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.tools.threads import render_event

    with opened(args) as harness:
        harness.sessions.get(args.session)
        events = list(harness.sessions.events(args.session))
    if args.json:
        rows = [{"seq": e.seq, "actor": e.actor, "createdAt": e.created_at, **e.payload} for e in events]
        return emit(out, args, rows, None)
    for e in events:
        print(f"{e.actor}\t{e.seq}\t{fmt_time(e.created_at)}\t{render_event(e)}", file=out)
    return 0
