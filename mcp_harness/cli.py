"""The `mcp-harness` command. Parses arguments, resolves settings, and calls into the harness or the server.

Only this module prints; `serve` never writes to stdout, which belongs to the JSON-RPC stream on stdio.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from mcp_harness import __version__
from mcp_harness.config import DEFAULT_HTTP, Settings, load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.errors import BadRequest, HarnessError


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="data directory (default: per-user; env MCP_HARNESS_DATA_DIR)")
    parser.add_argument("--config", type=Path, help="TOML config file (env MCP_HARNESS_CONFIG)")


def _definition_flags(parser: argparse.ArgumentParser, *, create: bool) -> None:
    parser.add_argument("--system-prompt", help="the agent's system prompt (markdown)")
    parser.add_argument("--system-prompt-file", type=Path, help="read the system prompt from a file")
    parser.add_argument("--model-provider", help="model provider name" + (" (default: from config)" if create else ""))
    parser.add_argument("--model", help="model id" + (" (default: from config)" if create else ""))
    parser.add_argument("--reasoning-level", help="minimal, low, medium, high or xhigh (if the model supports it)")
    parser.add_argument("--tools", help='comma-separated grants, e.g. "search,execute,publish"; "" grants none')
    parser.add_argument("--rename", help="new name" if not create else argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-harness", description="An agent harness as an MCP server: five verbs.")
    parser.add_argument("--version", action="version", version=f"mcp-harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve MCP over stdio (default) or Streamable HTTP")
    _common(serve)
    serve.add_argument(
        "--http",
        nargs="?",
        const=DEFAULT_HTTP,
        metavar="HOST:PORT",
        help=f"serve Streamable HTTP (default {DEFAULT_HTTP})",
    )
    serve.add_argument("--agent", help="agent name or id (default: the configured agent)")
    serve.add_argument("--session", help="bind stdio to this existing session id")

    agent = sub.add_parser("agent", help="create, list, show, update or delete agents")
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
        _common(p)
        p.add_argument("--json", action="store_true", help="print JSON")
    _common(create)
    create.add_argument("--json", action="store_true", help="print JSON")

    sessions = sub.add_parser("sessions", help="list sessions, newest first")
    _common(sessions)
    sessions.add_argument("--agent", help="only this agent's sessions")
    sessions.add_argument("--limit", type=int, default=25)
    sessions.add_argument("--json", action="store_true", help="print JSON")

    log = sub.add_parser("log", help="print a session's event log, one line per event, actor first")
    _common(log)
    log.add_argument("session", help="session id")
    log.add_argument("--json", action="store_true", help="print JSON lines")

    doctor = sub.add_parser("doctor", help="check the code sandbox (bubblewrap), its runtimes and the data dir")
    _common(doctor)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config, data_dir=args.data_dir)


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


def _fmt_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _agent_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.harness import Harness

    harness = Harness(_settings(args))
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
                print(f"{d.name}\t{r.id}\t{d.model_provider}/{d.model}\tupdated {_fmt_time(r.updated_at)}", file=out)
            return 0
        if args.action == "create":
            base = harness.default_definition().to_json()
            raw = {**base, "name": args.name, **_edits(args)}
            record = harness.agents.create(harness.account_id, normalize_definition(raw))
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
            updated = harness.agents.update(record.id, normalize_definition(raw))
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

    harness = Harness(_settings(args))
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
                    f"{s.id}\t{names.get(s.agent_id, s.agent_id)}\t{s.kind}\t{_fmt_time(s.updated_at)}\t"
                    f"{s.title or ''}",
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

    harness = Harness(_settings(args))
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
                print(f"{e.actor}\t{e.seq}\t{_fmt_time(e.created_at)}\t{render_event(e)}", file=out)
        return 0
    finally:
        harness.close()


def _data_dir_state(path: Path) -> tuple[bool, str]:
    """Whether `path` is, or can be created as, a writable directory, and a few words saying so."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False, "no existing parent directory"
        probe = probe.parent
    if not probe.is_dir():
        return False, f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return False, f"{probe} is not writable"
    return True, "writable" if probe == path else "writable; created on first use"


def _doctor_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.sandbox import Sandbox

    settings = _settings(args)
    sandbox = Sandbox(settings.sandbox)
    probe = sandbox.check()
    good = True

    def line(ok: bool | None, label: str, text: str) -> None:
        nonlocal good
        good = good and ok is not False
        print(f"[{'ok' if ok else '--' if ok is None else '!!'}] {label}: {text}", file=out)

    layout = probe.layout
    if layout is None:
        line(False, "bubblewrap", probe.reason or "not usable")
    else:
        line(True, "bubblewrap", f"{layout.bwrap} (version {probe.bwrap_version or 'unknown'})")
        if probe.reason is None:
            line(True, "sandbox", f"a probe sandbox runs; processes bounded by {probe.process_limit}")
        else:
            line(False, "sandbox", probe.reason)
    runtimes = sandbox.runtimes
    line(bool(runtimes), "runtimes", ", ".join(runtimes) or "none")
    if layout is not None:
        if layout.python is None:
            line(
                False,
                "python",
                f"{settings.sandbox.python} is missing or outside the system directories the "
                "sandbox mounts (/usr, /bin, /lib); set [sandbox] python to a system interpreter",
            )
        ts = f"{layout.ts.name} ({layout.ts.host_path})" if layout.ts else "none (install bun, deno or node >= 22.6)"
        line(None if layout.ts is None else True, "typescript", ts)
    line(None, "network", "on: sandboxed code can reach the network" if settings.sandbox.network else "off")
    writable, state = _data_dir_state(settings.data_dir)
    line(writable, "data dir", f"{settings.data_dir} ({state})")
    print("All good." if good else "Some checks failed; see the lines marked [!!].", file=out)
    return 0 if good else 1


def _serve_command(args: argparse.Namespace) -> int:
    import anyio

    from mcp_harness.harness import Harness
    from mcp_harness.server import build_server, serve_http, serve_stdio

    settings = load_settings(args.config, data_dir=args.data_dir)
    logging.getLogger().setLevel(settings.log_level.upper())
    harness = Harness(settings)
    try:
        server = build_server(harness, agent_name=args.agent, session_id=args.session)
        if args.http is None:
            anyio.run(serve_stdio, server)
            return 0
        host, _, port = args.http.rpartition(":")
        if not host or not port.isdigit():
            raise BadRequest(f"--http takes HOST:PORT, like {DEFAULT_HTTP}; got {args.http!r}.")
        host = host.strip("[]")
        print(
            f"mcp-harness {__version__} serving Streamable HTTP at http://{args.http}/mcp (data: {settings.data_dir})",
            file=sys.stderr,
        )

        async def run() -> None:
            await serve_http(
                server,
                host=host,
                port=int(port),
                tokens=settings.server.tokens,
                max_body_bytes=settings.server.max_body_bytes,
            )

        anyio.run(run)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        harness.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `mcp-harness` console script."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve_command(args)
        if args.command == "agent":
            return _agent_command(args, sys.stdout)
        if args.command == "sessions":
            return _sessions_command(args, sys.stdout)
        if args.command == "doctor":
            return _doctor_command(args, sys.stdout)
        return _log_command(args, sys.stdout)
    except HarnessError as exc:
        print(f"mcp-harness: {exc.message}", file=sys.stderr)
        return 2
