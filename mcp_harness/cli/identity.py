"""`mcp-harness identity …`: signing identities (HARNESS §14), the Ed25519 accounts agents may sign as.

A seed to import is read from `--file`, else from standard input (a hidden prompt at a terminal); it is never an
argument. `create` publishes the account's profile and home document; `import` publishes nothing. `export` writes
the seed as Seed's `.hmkey.json` to a mode-0600 file, and to stdout only when asked with `--file -`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_harness.cli._common import command_flags, emit, fmt_time, opened
from mcp_harness.cli.secret import read_hidden
from mcp_harness.errors import BadRequest, Conflict

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
        help="import an existing seed: a Seed .hmkey.json file, hex, base64, or 32 raw bytes",
        description="Import an Ed25519 seed: a Seed `.hmkey.json` key file (unencrypted; its profile name becomes the "
        "label unless --label is given), 64 hex characters or base64 text, or a file of exactly 32 raw bytes. Read "
        "from --file, else from standard input (a hidden prompt at a terminal). Publishes nothing.",
    )
    imp.add_argument("--label", help="the account's human name")
    imp.add_argument("--file", type=Path, help="read the seed from this file instead of stdin")
    imp.set_defaults(handler=_import)

    export = identity_sub.add_parser(
        "export",
        help="write an identity's seed as a Seed .hmkey.json key file (mode 0600)",
        description="Write the identity's seed in the `.hmkey.json` form the Seed desktop app and seed-cli import. "
        "The file is unencrypted: keep it secret. The seed goes to stdout only with `--file -`.",
    )
    export.add_argument("identity", metavar="NAME", help="label, account id or secret name (hm-account-…)")
    export.add_argument("--file", help="where to write it (default: ./<account id>.hmkey.json; - for stdout)")
    export.add_argument("--force", action="store_true", help="overwrite an existing file")
    export.set_defaults(handler=_export)

    listing = identity_sub.add_parser("list", help="list signing identities, newest first")
    listing.set_defaults(handler=_list)

    ref_help = "label, account id or secret name (hm-account-…)"
    update = identity_sub.add_parser("update", help="change an identity's label or picture (republishes its profile)")
    update.add_argument("identity", metavar="NAME", help=ref_help)
    update.add_argument("--label", help="the new human name")
    update.add_argument(
        "--avatar", type=Path, metavar="FILE", help="a picture to publish to IPFS as the profile's avatar (public)"
    )
    update.set_defaults(handler=_update)

    delete = identity_sub.add_parser("delete", help="delete an identity's sealed key (agents naming it then fail)")
    delete.add_argument("identity", metavar="NAME", help=ref_help)
    delete.set_defaults(handler=_delete)

    for parser in (create, imp, export, listing, update, delete):
        command_flags(parser)


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
    from mcp_harness.identity.keyfile import looks_like_keyfile, read_keyfile

    if args.file is not None:
        try:
            raw = args.file.read_bytes()
        except OSError as exc:
            raise BadRequest(f"Cannot read {args.file}: {exc.strerror}.") from exc
    else:
        raw = read_hidden("Seed (64 hex characters or base64): ")
    label = args.label
    if looks_like_keyfile(raw):
        seed, profile_name = read_keyfile(raw)
        label = label or profile_name
    else:
        seed = parse_seed(raw)
    with opened(args) as harness:
        identity = import_identity(harness, seed, label)
    return _show(identity, "Imported", args, out)


def _write_private(path: Path, data: bytes, *, force: bool) -> None:
    """Write `data` to a file only its owner can read; never over an existing file unless `force`."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise Conflict(f"{path} already exists; pass --force to overwrite it, or pick another --file.") from None
    except OSError as exc:
        raise BadRequest(f"Cannot write {path}: {exc.strerror}.") from exc
    try:
        os.fchmod(fd, 0o600)  # an existing file overwritten with --force keeps no wider mode
        os.write(fd, data)
    finally:
        os.close(fd)


def _export(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.identity.identities import load_keypair, resolve_identity
    from mcp_harness.identity.keyfile import SUFFIX, write_keyfile

    with opened(args) as harness:
        identity = resolve_identity(harness, args.identity)
        data = write_keyfile(load_keypair(harness, identity.name), identity.label)
    if args.file == "-":
        out.write(data.decode("utf-8"))
        out.flush()
        print(f"Exported signing identity {identity.label!r} to stdout (unencrypted).", file=sys.stderr)
        return 0
    path = Path(args.file) if args.file else Path(f"{identity.account_id}{SUFFIX}")
    _write_private(path, data, force=args.force)
    result = {**identity.to_json(), "file": str(path.resolve())}
    text = f"Exported signing identity {identity.label!r} to {path} (mode 0600, unencrypted: keep it secret)."
    return emit(out, args, result, text)


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

    if args.label is None and args.avatar is None:
        raise BadRequest("identity update needs --label NAME, --avatar FILE, or both.")
    if args.avatar is None:
        with opened(args) as harness:
            identity = update_identity(harness, args.identity, args.label)
        return _show(identity, "Updated", args, out)
    from mcp_harness.identity.avatar import set_avatar

    try:
        picture = args.avatar.open("rb")
    except OSError as exc:
        raise BadRequest(f"Cannot read {args.avatar}: {exc.strerror}.") from exc
    with picture, opened(args) as harness:
        limit = harness.settings.ipfs.max_file_bytes
        identity, icon = set_avatar(harness, args.identity, picture, label=args.label, max_bytes=limit)
    text = f"Updated signing identity {identity.label!r}: avatar {icon} ({identity.account_id})."
    return emit(out, args, {**identity.to_json(), "icon": icon}, text)


def _delete(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.identity.identities import delete_identity, resolve_identity

    with opened(args) as harness:
        identity = resolve_identity(harness, args.identity)
        delete_identity(harness, identity.name)
    text = f"Deleted signing identity {identity.label!r} ({identity.account_id}, secret {identity.name})."
    return emit(out, args, {"deleted": identity.name, **identity.to_json()}, text)
