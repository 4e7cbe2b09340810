"""`mcp-harness invoke VERB --session ID …`: the user runs read, write or call on a session, as actor `user`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mcp_harness.cli._common import EXIT_FAILURE, common_flags, opened
from mcp_harness.errors import BadRequest


def register(sub: Any) -> None:
    invoke = sub.add_parser(
        "invoke",
        help="run read, write or call on a session as the user (logged with actor user)",
        description="Run a verb on a session as the user. The call and its result are logged with actor `user`, "
        "the agent sees them in the thread, and they never promote tools. delegate and plan are the agent's own.",
    )
    invoke.set_defaults(handler=_invoke_command)
    invoke.add_argument("verb", help="read, write or call")
    invoke.add_argument("--session", required=True, help="session id (see `mcp-harness sessions`)")
    invoke.add_argument("--address", help="read/write: the address, e.g. ~/memory/notes.md")
    content = invoke.add_mutually_exclusive_group()
    content.add_argument("--content", help="write: the content")
    content.add_argument("--content-file", type=Path, help="write: read the content from a file")
    content.add_argument("--content-stdin", action="store_true", help="write: read the content from stdin")
    invoke.add_argument("--options", help="read/write: options as a JSON object")
    invoke.add_argument("--format", choices=["markdown", "json"], help="read: result format")
    invoke.add_argument("--dry-run", action="store_true", help="write: validate an hm:// write only")
    invoke.add_argument("--tool", help="call: the tool name")
    invoke.add_argument("--input", help="call: the tool input as a JSON object")
    invoke.add_argument("--args", help="the verb's whole input as one JSON object (instead of the flags above)")
    invoke.add_argument("--json", action="store_true", help="print the structured result as JSON")
    common_flags(invoke)


def _json_object(flag: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"{flag} must be a JSON object: {exc.msg} at column {exc.colno}.") from None
    if not isinstance(value, dict):
        raise BadRequest(f'{flag} must be a JSON object, like \'{{"key": "value"}}\'.')
    return value  # pyright: ignore[reportUnknownVariableType]


def arguments_of(args: argparse.Namespace) -> dict[str, Any]:
    """The verb input the flags describe."""
    if args.args is not None:
        return _json_object("--args", args.args)
    out: dict[str, Any] = {}
    if args.verb == "call":
        if args.tool is None:
            raise BadRequest("invoke call needs --tool NAME (and usually --input JSON).")
        out["tool"] = args.tool
        if args.input is not None:
            out["input"] = _json_object("--input", args.input)
        return out
    if args.address is None:
        raise BadRequest(f"invoke {args.verb} needs --address, e.g. ~/memory/notes.md.")
    out["address"] = args.address
    if args.options is not None:
        out["options"] = _json_object("--options", args.options)
    if args.verb == "read" and args.format:
        out["format"] = args.format
    if args.verb == "write":
        if args.content is not None:
            out["content"] = args.content
        elif args.content_file is not None:
            try:
                out["content"] = args.content_file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise BadRequest(f"Cannot read {args.content_file}: {exc}.") from None
        elif args.content_stdin:
            out["content"] = sys.stdin.read()
        if args.dry_run:
            out["dryRun"] = True
    return out


def _invoke_command(args: argparse.Namespace, out: Any) -> int:
    import anyio

    from mcp_harness.binding import SessionBinding
    from mcp_harness.user_verbs import invoke_as_user

    arguments = arguments_of(args)
    with opened(args) as harness:

        def bind(agent_id: str) -> SessionBinding:
            return SessionBinding(harness, agent_id=agent_id, session_id=args.session)

        result, error = anyio.run(invoke_as_user, harness.sessions, bind, args.session, args.verb, arguments)
    if error is not None:
        print(f"mcp-harness: {args.verb} failed: {error.message}", file=sys.stderr)
        return EXIT_FAILURE  # the verb ran and answered with an error (logged in the thread)
    assert result is not None
    print(json.dumps(result.data, indent=2, ensure_ascii=False) if args.json else result.text, file=out)
    return 0
