"""`mcp-harness token new`: a fresh HTTP bearer token, printed once, with the config lines that store its hash."""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from mcp_harness.config import token_hash


def register(sub: Any) -> None:
    token = sub.add_parser("token", help="make HTTP bearer tokens (the config stores only their hashes)")
    token.set_defaults(handler=_token_command)
    actions = token.add_subparsers(dest="action", required=True)
    new = actions.add_parser("new", help="print a new token and the [[http.tokens]] entry for the config")
    new.add_argument("--agent", help="the agent its requests act as (default: the configured agent)")
    new.add_argument("--label", help="a name to recognise it by")


def _token_command(args: argparse.Namespace, out: Any) -> int:
    token = secrets.token_urlsafe(32)
    lines = ["[[http.tokens]]", f'hash = "{token_hash(token)}"']
    if args.agent:
        lines.append(f'agent = "{args.agent}"')
    if args.label:
        lines.append(f'label = "{args.label}"')
    print(f"Token (shown once; give it to the client as `Authorization: Bearer <token>`):\n\n  {token}\n", file=out)
    print("Add to the config file:\n\n" + "\n".join(lines), file=out)
    return 0
