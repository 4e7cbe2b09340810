"""`mcp-harness agent …`, `sessions` and `log`: the owner's view of agents and their conversations."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mcp_harness.cli._common import common_flags, fmt_time, settings_of
from mcp_harness.definition import normalize_definition
from mcp_harness.errors import BadRequest


def register(sub: Any) -> None:
    agent = sub.add_parser("agent", help="create, list, show, update or delete agents")
    agent.set_defaults(handler=_agent_command)
    agent_sub = agent.add_subparsers(dest="action", required=True)
    create = agent_sub.add_parser("create", help="create an agent")
    create.add_argument("name")
    _definition_flags(create, create=True)
    for action in ("list", "show", "update", "delete"):
        p = agent_sub.add_parser(action, help=f"{action} agent(s)")
        if action != "list":
            p.add_argument("name", help="agent name or id")
        if action == "update":
            _definition_flags(p, create=False)
        common_flags(p)
        p.add_argument("--json", action="store_true", help="print JSON")
    common_flags(create)
    create.add_argument("--json", action="store_true", help="print JSON")

    sessions = sub.add_parser("sessions", help="list sessions, newest first")
    sessions.set_defaults(handler=_sessions_command)
    common_flags(sessions)
    sessions.add_argument("--agent", help="only this agent's sessions")
    sessions.add_argument("--limit", type=int, default=25)
    sessions.add_argument("--json", action="store_true", help="print JSON")

    log = sub.add_parser("log", help="print a session's event log, one line per event, actor first")
    log.set_defaults(handler=_log_command)
    common_flags(log)
    log.add_argument("session", help="session id")
    log.add_argument("--json", action="store_true", help="print JSON lines")


def _definition_flags(parser: argparse.ArgumentParser, *, create: bool) -> None:
    parser.add_argument("--system-prompt", help="the agent's system prompt (markdown)")
    parser.add_argument("--system-prompt-file", type=Path, help="read the system prompt from a file")
    parser.add_argument("--model-provider", help="model provider name" + (" (default: from config)" if create else ""))
    parser.add_argument("--model", help="model id" + (" (default: from config)" if create else ""))
    parser.add_argument("--reasoning-level", help="minimal, low, medium, high or xhigh (if the model supports it)")
    parser.add_argument("--tools", help='comma-separated grants, e.g. "search,execute,publish"; "" grants none')
    parser.add_argument("--rename", help="new name" if not create else argparse.SUPPRESS)


def _edits(args: argparse.Namespace) -> dict[str, Any]:
    edits: dict[str, Any] = {}
    if args.system_prompt_file is not None:
        try:
            edits["systemPrompt"] = args.system_prompt_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise BadRequest(f"Cannot read {args.system_prompt_file}: {exc.strerror}.") from exc
    elif args.system_prompt is not None:
        edits["systemPrompt"] = args.system_prompt
    for flag, key in (("model_provider", "modelProvider"), ("model", "model"), ("reasoning_level", "reasoningLevel")):
        if getattr(args, flag) is not None:
            edits[key] = getattr(args, flag)
    if args.tools is not None:
        edits["tools"] = [t.strip() for t in args.tools.split(",") if t.strip()]
    return edits


def _agent_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.harness import Harness

    harness = Harness(settings_of(args))
    try:
        if args.action == "list":
            records = harness.agents.list(harness.account_id)
            if args.json:
                print(json.dumps([r.to_json() for r in records], indent=2), file=out)
            elif not records:
                print(
                    "No agents yet. `mcp-harness agent create NAME` makes one; serving creates the default.", file=out
                )
            for r in records if not args.json else []:
                d = r.definition
                print(f"{d.name}\t{r.id}\t{d.model_provider}/{d.model}\tupdated {fmt_time(r.updated_at)}", file=out)
            return 0
        if args.action == "create":
            base = harness.default_definition().to_json()
            raw = {**base, "name": args.name, **_edits(args)}
            definition = normalize_definition(raw)
            harness.check_definition(definition)
            record = harness.agents.create(harness.account_id, definition)
            print(
                json.dumps(record.to_json(), indent=2) if args.json else f"Created agent {args.name} ({record.id}).",
                file=out,
            )
            return 0
        record = harness.agents.find(harness.account_id, args.name)
        if record is None:
            raise BadRequest(f"No agent named {args.name!r}. `mcp-harness agent list` shows them.")
        if args.action == "show":
            if args.json:
                print(json.dumps(record.to_json(), indent=2), file=out)
            else:
                d = record.definition.to_json()
                print(f"{d['name']} ({record.id})", file=out)
                for key, value in d.items():
                    if key != "name":
                        print(f"  {key}: {value if isinstance(value, str) else json.dumps(value)}", file=out)
                print(f"  sessions: {harness.agents.count_sessions(record.id)}", file=out)
                print(f"  memory: {record.memory_dir}", file=out)
            return 0
        if args.action == "update":
            raw = {**record.definition.to_json(), **_edits(args)}
            if args.rename:
                raw["name"] = args.rename
            definition = normalize_definition(raw)
            harness.check_definition(definition)
            updated = harness.agents.update(record.id, definition)
            print(
                json.dumps(updated.to_json(), indent=2) if args.json else f"Updated agent {updated.definition.name}.",
                file=out,
            )
            return 0
        harness.agents.delete(record.id)
        print(json.dumps({"deleted": record.id}) if args.json else f"Deleted agent {record.definition.name}.", file=out)
        return 0
    finally:
        harness.close()


def _sessions_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.harness import Harness

    harness = Harness(settings_of(args))
    try:
        agent_id = None
        if args.agent:
            found = harness.agents.find(harness.account_id, args.agent)
            if found is None:
                raise BadRequest(f"No agent named {args.agent!r}.")
            agent_id = found.id
        names = {a.id: a.definition.name for a in harness.agents.list(harness.account_id)}
        records = harness.sessions.list(harness.account_id, agent_id=agent_id, limit=max(1, args.limit))
        for s in records:
            if args.json:
                print(
                    json.dumps(
                        {
                            "id": s.id,
                            "agent": names.get(s.agent_id),
                            "kind": s.kind,
                            "title": s.title,
                            "updatedAt": s.updated_at,
                        }
                    ),
                    file=out,
                )
            else:
                print(
                    f"{s.id}\t{names.get(s.agent_id, s.agent_id)}\t{s.kind}\t{fmt_time(s.updated_at)}\t{s.title or ''}",
                    file=out,
                )
        if not records and not args.json:
            print("No sessions yet.", file=out)
        return 0
    finally:
        harness.close()


def _log_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.harness import Harness
    from mcp_harness.tools.threads import render_event

    harness = Harness(settings_of(args))
    try:
        harness.sessions.get(args.session)
        for e in harness.sessions.events(args.session):
            if args.json:
                print(
                    json.dumps(
                        {"seq": e.seq, "actor": e.actor, "createdAt": e.created_at, **e.payload}, ensure_ascii=False
                    ),
                    file=out,
                )
            else:
                print(f"{e.actor}\t{e.seq}\t{fmt_time(e.created_at)}\t{render_event(e)}", file=out)
        return 0
    finally:
        harness.close()
