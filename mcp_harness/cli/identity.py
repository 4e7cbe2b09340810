"""`mcp-harness identity …`: signing identities (HARNESS §14), the Ed25519 accounts agents may sign as.

A seed to import is read from `--file`, else from standard input (a hidden prompt at a terminal); it is never an
argument. Nothing is published yet: create and import only store the sealed seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_harness.cli._common import common_flags, fmt_time, opened
from mcp_harness.cli.secret import read_hidden
from mcp_harness.errors import BadRequest

if TYPE_CHECKING:
    from mcp_harness.identity.identities import Identity


def register(sub: Any) -> None:
    identity = sub.add_parser("identity", help="create, import, list, update or delete signing identities")
    identity_sub = identity.add_subparsers(dest="action", required=True)

    create = identity_sub.add_parser("create", help="generate a new Ed25519 signing identity")
    create.add_argument("--label", help="the account's human name (default: 'Agent account z6Mk…')")
    create.set_defaults(handler=_create)

    imp = identity_sub.add_parser(
        "import",
        help="import an existing 32-byte seed (hex, base64, or raw bytes in a file)",
        description="Import an Ed25519 seed: 64 hex characters or base64 text, or a file of exactly 32 raw bytes. "
        "Read from --file, else from standard input (a hidden prompt at a terminal). Publishes nothing.",
    )
    imp.add_argument("--label", help="the account's human name")
    imp.add_argument("--file", type=Path, help="read the seed from this file instead of stdin")
    imp.set_defaults(handler=_import)

    listing = identity_sub.add_parser("list", help="list signing identities, newest first")
    listing.set_defaults(handler=_list)

    update = identity_sub.add_parser("update", help="change an identity's label")
    update.add_argument("identity", metavar="NAME_OR_ACCOUNT", help="secret name (hm-account-…) or account id")
    update.add_argument("--label", required=True, help="the new human name")
    update.set_defaults(handler=_update)

    delete = identity_sub.add_parser("delete", help="delete an identity's sealed key (agents naming it then fail)")
    delete.add_argument("identity", metavar="NAME_OR_ACCOUNT", help="secret name (hm-account-…) or account id")
    delete.set_defaults(handler=_delete)

    for parser in (create, imp, listing, update, delete):
        common_flags(parser)
        parser.add_argument("--json", action="store_true", help="print JSON")


def _show(identity: Identity, verb: str, args: argparse.Namespace, out: Any) -> int:
    if args.json:
        print(json.dumps(identity.to_json(), indent=2), file=out)
    else:
        print(f"{verb} signing identity {identity.label!r}: {identity.account_id} (secret {identity.name}).", file=out)
    return 0


def _create(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.identity.identities import create_identity

    with opened(args) as harness:
        identity = create_identity(harness, args.label)
    return _show(identity, "Created", args, out)


def _import(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.identity.identities import import_identity, parse_seed

    if args.file is not None:
        try:
            raw = args.file.read_bytes()
        except OSError as exc:
            raise BadRequest(f"Cannot read {args.file}: {exc.strerror}.") from exc
    else:
        raw = read_hidden("Seed (64 hex characters or base64): ")
    seed = parse_seed(raw)
    with opened(args) as harness:
        identity = import_identity(harness, seed, args.label)
    return _show(identity, "Imported", args, out)


def _list(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.identity.identities import list_identities

    with opened(args) as harness:
        identities = list_identities(harness)
    if args.json:
        print(json.dumps([i.to_json() for i in identities], indent=2), file=out)
        return 0
    if not identities:
        print("No signing identities yet. `mcp-harness identity create --label NAME` makes one.", file=out)
    for i in identities:
        print(f"{i.name}\t{i.account_id}\t{i.label}\tcreated {fmt_time(i.created_at)}", file=out)
    return 0


def _update(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.identity.identities import update_identity

    with opened(args) as harness:
        identity = update_identity(harness, args.identity, args.label)
    return _show(identity, "Updated", args, out)


def _delete(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.identity.identities import delete_identity

    with opened(args) as harness:
        delete_identity(harness, args.identity)
    print(
        json.dumps({"deleted": args.identity}) if args.json else f"Deleted signing identity {args.identity}.", file=out
    )
    return 0
