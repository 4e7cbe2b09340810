"""`mcp-harness token new`: a fresh HTTP bearer token, printed once, with the config lines that store its hash."""

from __future__ import annotations

import argparse
import json
import secrets
from typing import Any

from mcp_harness.cli._common import command_flags, emit, opened
from mcp_harness.config import token_hash
from mcp_harness.errors import NotFound


def register(sub: Any) -> None:
    token = sub.add_parser("token", help="make HTTP bearer tokens (the config stores only their hashes)")
    token.set_defaults(handler=_token_command)
    actions = token.add_subparsers(dest="action", required=True)
    new = actions.add_parser("new", help="print a new token and the [[http.tokens]] entry for the config")
    new.add_argument("--agent", help="the agent its requests act as (default: the configured agent)")
    new.add_argument("--label", help="a name to recognise it by")
    command_flags(new)


def _token_command(args: argparse.Namespace, out: Any) -> int:
    if args.agent:
        # A token for an agent that does not exist would be refused on every request; say so now.
        with opened(args) as harness:
            found = harness.agents.find(harness.account_id, args.agent)
            if found is None:
                names = ", ".join(a.definition.name for a in harness.agents.list(harness.account_id)) or "none yet"
                raise NotFound(
                    f"No agent named {args.agent!r} (agents: {names}); create it first with "
                    f"`mcp-harness agent create {args.agent}`, or leave out --agent for the configured agent."
                )
    token = secrets.token_urlsafe(32)
    entry: dict[str, str] = {"hash": token_hash(token)}
    if args.agent:
        entry["agent"] = args.agent
    if args.label:
        entry["label"] = args.label
    # json.dumps writes a TOML basic string for these values (no control characters reach a label from argv).
    lines = ["[[http.tokens]]", *(f"{key} = {json.dumps(value)}" for key, value in entry.items())]
    text = (
        f"Token (shown once; give it to the client as `Authorization: Bearer <token>`):\n\n  {token}\n\n"
        "Add to the config file:\n\n" + "\n".join(lines)
    )
    return emit(out, args, {"token": token, "entry": entry, "toml": "\n".join(lines)}, text)
