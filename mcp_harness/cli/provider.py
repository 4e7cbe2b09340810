"""`mcp-harness provider add|list|delete`: the model providers agents can name.

A key is read only from stdin (`--api-key-stdin`) or a hidden prompt (`--api-key-prompt`), never from argv, where
it would land in shell history and in every process listing. Listings say where a key comes from, never what it is.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from mcp_harness.cli._common import command_flags, emit, opened
from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.models.catalog import TYPES
from mcp_harness.models.providers import MAX_KEY_BYTES


def register(sub: Any) -> None:
    provider = sub.add_parser("provider", help="add, list or delete model providers")
    provider_sub = provider.add_subparsers(dest="action", required=True)

    add = provider_sub.add_parser("add", help="store a model provider (its key sealed as secret provider-NAME)")
    add.set_defaults(handler=_add)
    add.add_argument("name", help="provider name agents refer to (lowercase letters, digits, - and _)")
    add.add_argument("--type", required=True, help=f"one of: {', '.join(TYPES)}")
    add.add_argument("--base-url", help="API root for ollama and custom (hosted types always use their own)")
    add.add_argument("--model", help="default model id for agents naming this provider")
    add.add_argument("--api-key-env", metavar="VAR", help="read the key from this environment variable when used")
    key = add.add_mutually_exclusive_group()
    key.add_argument("--api-key-stdin", action="store_true", help="read the key from stdin and seal it")
    key.add_argument("--api-key-prompt", action="store_true", help="ask for the key (hidden input) and seal it")
    key.add_argument("--api-key-secret", metavar="SECRET", help="take the key from this existing sealed secret")
    add.add_argument("--file", type=Path, help="scripted: a JSON file of canned replies")
    command_flags(add)

    listing = provider_sub.add_parser("list", help="list providers with their URL and key source (never the key)")
    listing.set_defaults(handler=_list)
    command_flags(listing)

    delete = provider_sub.add_parser("delete", help="delete a stored provider and its sealed key")
    delete.set_defaults(handler=_delete)
    delete.add_argument("name")
    delete.add_argument("--force", action="store_true", help="delete it even while agents name it")
    command_flags(delete)


def _read_key(args: argparse.Namespace) -> bytes | None:
    if args.api_key_stdin:
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read(MAX_KEY_BYTES + 1) if stream is not None else sys.stdin.read(MAX_KEY_BYTES + 1).encode()
        if not data.strip():
            raise BadRequest("--api-key-stdin read no key from stdin; pipe it in, e.g. `… < keyfile`.")
        return data
    if args.api_key_prompt:
        # getpass writes its prompt to the terminal (or stderr), never to stdout.
        return getpass.getpass(f"API key for {args.name}: ").encode()
    return None


def _add(args: argparse.Namespace, out: Any) -> int:
    key = _read_key(args)
    with opened(args) as harness:
        providers = harness.providers
        provider = providers.add(
            args.name,
            args.type,
            base_url=args.base_url,
            api_key=key,
            api_key_env=args.api_key_env,
            api_key_secret=args.api_key_secret,
            model=args.model,
            file=args.file,
        )
        source = providers.key_source(provider)
    url = f" at {provider.base_url}" if provider.base_url else ""
    model = f", default model {provider.model}" if provider.model else ""
    text = f"Added provider {provider.name} ({provider.type}{url}{model}); key: {source.describe()}."
    return emit(out, args, {**provider.to_json(), "key": source.describe()}, text)


def _list(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        providers = harness.providers
        rows = [(p, providers.key_source(p).describe()) for p in providers.list()]
    lines = []
    for p, key in rows:
        model = f"\tmodel {p.model}" if p.model else ""
        where = p.base_url or (str(p.file) if p.file else "-")
        lines.append(f"{p.name}\t{p.type}\t{p.source}\t{where}\tkey: {key}{model}")
    return emit(out, args, [{**p.to_json(), "key": key} for p, key in rows], "\n".join(lines))


def _delete(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        providers = harness.providers
        users = providers.users(args.name)
        deleted = providers.delete(args.name, force=args.force)
        still = providers.get(args.name) if deleted else None
    if not deleted:
        raise NotFound(f"No stored provider named {args.name!r}. `mcp-harness provider list` shows them.")
    shadow = f" [providers.{args.name}] in the config still defines it." if still is not None else ""
    stranded = f" Now naming a missing provider: {', '.join(users)}." if users and still is None else ""
    return emit(out, args, {"deleted": args.name, "agents": users}, f"Deleted provider {args.name}.{shadow}{stranded}")
