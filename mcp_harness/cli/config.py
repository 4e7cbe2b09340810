"""`mcp-harness config init|show|path`: the one config file the CLI and the server both read.

Without `--config` or `MCP_HARNESS_CONFIG`, both read `$XDG_CONFIG_HOME/mcp-harness/config.toml` (else
`~/.config/mcp-harness/config.toml`) when it exists, so `provider list` shows the providers the server uses.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from mcp_harness.cli._common import command_flags, emit
from mcp_harness.config import EXAMPLE_CONFIG, config_location, settings_with_sources
from mcp_harness.errors import BadRequest, Conflict

HIDDEN = "(hidden)"
_SECRET_WORDS = ("password", "passphrase", "private", "plaintext")


def register(sub: Any) -> None:
    config = sub.add_parser("config", help="write, show or locate the config file")
    config_sub = config.add_subparsers(dest="action", required=True)
    init = config_sub.add_parser(
        "init",
        help="write the documented example config (every setting, with its default) where it is read",
        description="Write the documented example to the config path (`mcp-harness config path`): --config, else "
        "MCP_HARNESS_CONFIG, else the default path. An existing file is kept unless --force.",
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(handler=_init)
    show = config_sub.add_parser(
        "show", help="the effective settings and where each came from (default, file, env, flag); secrets masked"
    )
    show.set_defaults(handler=_show)
    path = config_sub.add_parser("path", help="the config file the CLI and the server read, and whether it exists")
    path.set_defaults(handler=_path)
    for p in (init, show, path):
        command_flags(p)


def _location(args: argparse.Namespace) -> dict[str, Any]:
    path, origin = config_location(args.config)
    return {"path": str(path), "source": origin, "exists": path.is_file()}


def _path(args: argparse.Namespace, out: Any) -> int:
    where = _location(args)
    note = "" if where["exists"] else "  (does not exist; `mcp-harness config init` writes it)"
    return emit(out, args, where, f"{where['path']}{note}")


def _init(args: argparse.Namespace, out: Any) -> int:
    path, _ = config_location(args.config)
    if path.exists() and not args.force:
        raise Conflict(f"{path} already exists; pass --force to replace it with the example (or edit it).")
    try:
        text = EXAMPLE_CONFIG.read_text(encoding="utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)  # whole or not at all: a server reading it never sees half a file
    except OSError as exc:
        raise BadRequest(f"Cannot write {path}: {exc.strerror}.") from exc
    return emit(out, args, {"path": str(path), "written": True}, f"Wrote the example config to {path}.")


def _masked(key: str, value: Any) -> Any:
    """`value` with token hashes and anything secret-looking replaced by a marker."""
    if isinstance(value, dict):
        return {k: _masked(k, v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_masked(key, v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if value is not None and (key == "hash" or key == "token" or any(w in key for w in _SECRET_WORDS)):
        return HIDDEN
    return value


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))  # pyright: ignore[reportUnknownArgumentType]
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _source_of(key: str, sources: dict[str, str]) -> str:
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:end]))
        if found:
            return found
    return "default"


def _show(args: argparse.Namespace, out: Any) -> int:
    settings, sources, path = settings_with_sources(args.config, data_dir=args.data_dir)
    flat = _flatten(_masked("", settings.model_dump(mode="json")))
    rows = {key: {"value": value, "source": _source_of(key, sources)} for key, value in flat.items()}
    where = _location(args)
    data = {"configFile": str(path) if path else None, "configSource": where["source"], "settings": rows}
    if path is not None:
        head = f"# config file: {path} ({where['source']})"
    else:
        head = f"# config file: none ({where['path']} does not exist; `mcp-harness config init` writes it)"
    width = max(len(k) for k in rows)
    lines = [head] + [
        f"{key.ljust(width)} = {json.dumps(row['value'], ensure_ascii=False)}  # {row['source']}"
        for key, row in rows.items()
    ]
    return emit(out, args, data, "\n".join(lines))
