"""`mcp-harness secret …`: sealed secrets (provider API keys and the like), set, listed and deleted by the owner.

A value is read from standard input when it is piped, else from a hidden prompt; there is deliberately no way to
pass it as an argument, since arguments end up in shell history and in every process listing.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from mcp_harness.cli._common import command_flags, emit, fmt_time, opened
from mcp_harness.errors import BadRequest, NotFound


def register(sub: Any) -> None:
    secret = sub.add_parser("secret", help="set, list or delete sealed secrets (values never shown)")
    secret_sub = secret.add_subparsers(dest="action", required=True)

    put = secret_sub.add_parser(
        "set",
        help="create or replace a secret; the value comes from stdin when piped, else a hidden prompt",
        description="Create or replace a secret. The value is read from standard input when it is piped (one "
        "trailing newline is dropped), else from a hidden prompt. It is never taken from the command line.",
    )
    put.add_argument("name", help="letters, digits and . _ : - (at most 128 bytes)")
    put.add_argument("--kind", default="secret", help="a tag shown by `secret list` (default: secret)")
    put.set_defaults(handler=_set)

    listing = secret_sub.add_parser("list", help="list secrets: name, kind, metadata, times; never values")
    listing.add_argument("--kind", help="only secrets of this kind")
    listing.set_defaults(handler=_list)

    delete = secret_sub.add_parser("delete", help="delete a secret")
    delete.add_argument("name")
    delete.set_defaults(handler=_delete)

    for parser in (put, listing, delete):
        command_flags(parser)


def read_hidden(prompt: str) -> bytes:
    """Bytes piped on stdin, or what the user types at a prompt that does not echo."""
    if sys.stdin is None or not sys.stdin.isatty():
        stream = sys.stdin
        if stream is None:
            return b""
        buffer = getattr(stream, "buffer", None)
        return buffer.read() if buffer is not None else stream.read().encode("utf-8")
    return getpass.getpass(prompt).encode("utf-8")


def _strip_line_end(value: bytes) -> bytes:
    # `echo KEY | mcp-harness secret set NAME` appends a newline that is never part of an API key.
    for ending in (b"\r\n", b"\n"):
        if value.endswith(ending):
            return value[: -len(ending)]
    return value


def _set(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.store.secrets import check_name  # here, so `serve` never imports PyNaCl at start-up

    if args.kind == "hm-account-key":
        raise BadRequest("Signing identities are made with `mcp-harness identity create` or `identity import`.")
    check_name(args.name)  # before prompting, so a typo does not cost the user a pasted key
    value = _strip_line_end(read_hidden(f"Value for {args.name}: "))
    if not value:
        raise BadRequest(f"No value for secret {args.name!r}: pipe it on stdin or type it at the prompt.")
    with opened(args) as harness:
        record = harness.secrets.set(harness.account_id, args.name, value, kind=args.kind)
    return emit(out, args, record.to_json(), f"Stored secret {record.name} ({record.kind}).")


def _list(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        records = harness.secrets.list(harness.account_id, kind=args.kind)
    if args.json:
        print(json.dumps([r.to_json() for r in records], indent=2), file=out)
        return 0
    if not records:
        print("No secrets yet. `mcp-harness secret set NAME` stores one (value from stdin or a prompt).", file=out)
    for r in records:
        metadata = f"\t{json.dumps(r.metadata, ensure_ascii=False)}" if r.metadata else ""
        print(f"{r.name}\t{r.kind}\tupdated {fmt_time(r.updated_at)}{metadata}", file=out)
    return 0


def _delete(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        if not harness.secrets.delete(harness.account_id, args.name):
            raise NotFound(f"No secret named {args.name!r}. `mcp-harness secret list` shows them.")
    return emit(out, args, {"deleted": args.name}, f"Deleted secret {args.name}.")
