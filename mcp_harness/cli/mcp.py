"""`mcp-harness mcp add|list|show|remove|refresh`: other MCP servers mounted behind `call` (issue 20).

`mcp add NAME -- CMD ARGS…` mounts a stdio server, `mcp add NAME --url URL` a Streamable HTTP one; both are stored
in the database beside the config's `[[mcp.servers]]`. A secret value is never an argument: `--env-secret K=NAME`
and `--bearer-secret NAME` name sealed secrets (`mcp-harness secret set NAME`). Adding a server lists its tools
once, so their documents exist before the first `serve`; `refresh` lists them again.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from mcp_harness.cli._common import EXIT_FAILURE, command_flags, emit, opened, plural
from mcp_harness.errors import BadRequest, Conflict, HarnessError, NotFound


def register(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="mount other MCP servers, whose tools `call` reaches as mcp__<server>__<tool>")
    mcp_sub = mcp.add_subparsers(dest="action", required=True)

    add = mcp_sub.add_parser(
        "add",
        help="mount a server: `mcp add NAME -- CMD ARGS…` (stdio) or `mcp add NAME --url URL` (Streamable HTTP)",
        description="Mount an MCP server and list its tools. Its tools become callable as mcp__NAME__<tool> by "
        "agents granted them (an unset grant list grants all; `mcp__NAME__*` grants one server's).",
    )
    add.add_argument("name", help="1 to 32 characters of a-z, 0-9 and - (no _), starting with a letter")
    add.add_argument("rest", nargs=argparse.REMAINDER, help="options, then -- and the command with its arguments")
    _add_options(add)
    add.set_defaults(handler=_add)

    listing = mcp_sub.add_parser("list", help="list mounted servers: name, transport, source, tools")
    listing.set_defaults(handler=_list)
    show = mcp_sub.add_parser("show", help="one server: how it is started and its tools")
    show.add_argument("name")
    show.set_defaults(handler=_show)
    remove = mcp_sub.add_parser("remove", help="unmount a stored server and drop its tool documents")
    remove.add_argument("name")
    remove.set_defaults(handler=_remove)
    refresh = mcp_sub.add_parser("refresh", help="list servers' tools again; only changed documents are rewritten")
    refresh.add_argument("name", nargs="?", help="one server (default: every mounted server)")
    refresh.set_defaults(handler=_refresh)
    for parser in (listing, show, remove, refresh):
        command_flags(parser)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="an environment variable (stdio)")
    parser.add_argument(
        "--env-secret", action="append", default=[], metavar="K=SECRET", help="a variable set from a sealed secret"
    )
    parser.add_argument("--url", help="a Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp")
    parser.add_argument("--header", action="append", default=[], metavar="K=V", help="an HTTP header (HTTP)")
    parser.add_argument("--bearer-secret", metavar="SECRET", help="send Authorization: Bearer <this sealed secret>")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per-call timeout (default 60 s)")
    parser.add_argument("--no-list", action="store_true", help="do not start it now to list its tools")
    command_flags(parser)


def _split_rest(args: argparse.Namespace) -> None:
    """`mcp add NAME [options] -- CMD ARGS…`: argparse hands everything after NAME over as `rest` (it cannot tell
    options from the command's own flags), so the options before `--` are parsed here and the rest is the command."""
    rest = list(args.rest)
    if "--" in rest:
        cut = rest.index("--")
        options, args.command = rest[:cut], rest[cut + 1 :]
    elif rest and not rest[0].startswith("-"):
        options, args.command = [], rest  # argparse drops a `--` that directly follows NAME
    else:
        options, args.command = rest, []
    if options:
        later = argparse.ArgumentParser(prog="mcp-harness mcp add NAME", add_help=False)
        _add_options(later)
        later.parse_args(options, namespace=args)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise BadRequest(f"{flag} takes KEY=VALUE (got {value!r}).")
        out[key] = rest
    return out


def _add(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.callables.upstream import ServerSpec, check_spec

    _split_rest(args)
    if args.url and (args.command or args.env or args.env_secret):
        raise BadRequest("Give either --url (Streamable HTTP) or a command after -- (stdio), not both.")
    if not args.url and (args.header or args.bearer_secret):
        raise BadRequest("--header and --bearer-secret are for an HTTP server (--url).")
    spec = check_spec(
        ServerSpec(
            name=args.name,
            command=tuple(args.command),
            env=_pairs(args.env, "--env"),
            env_secrets=_pairs(args.env_secret, "--env-secret"),
            url=args.url,
            headers=_pairs(args.header, "--header"),
            bearer_secret=args.bearer_secret,
            timeout_s=args.timeout,
        )
    )
    with opened(args) as harness:
        if args.name in {s.name for s in harness.settings.mcp.servers}:
            raise Conflict(f"[[mcp.servers]] in the config already defines {args.name}; pick another name.")
        for secret in [*spec.env_secrets.values(), *([spec.bearer_secret] if spec.bearer_secret else [])]:
            if harness.secrets.find(harness.account_id, secret) is None:
                raise NotFound(f"No secret named {secret!r}; store it first with `mcp-harness secret set {secret}`.")
        harness.upstream_store.add_server(spec)
        data: dict[str, Any] = spec.to_json()
        text = f"Mounted MCP server {spec.name} ({spec.transport})."
        if not args.no_list:
            try:
                anyio.run(harness.upstreams.refresh, spec.name)
                count = len(harness.upstream_store.tools([spec.name]))
                data["tools"] = count
                text += f" {plural(count, 'tool')}: call them as mcp__{spec.name}__<tool>."
            except HarnessError as exc:
                data["error"] = exc.message
                why = exc.message.rstrip(".")
                text += f" Its tools could not be listed yet ({why}); `mcp-harness mcp refresh {spec.name}` retries."
    return emit(out, args, data, text)


def _rows(harness: Any) -> list[dict[str, Any]]:
    rows = []
    for spec in harness.mcp_servers().values():
        row = spec.to_json()
        row["tools"] = len(harness.upstream_store.tools([spec.name]))
        rows.append(row)
    return rows


def _target(row: dict[str, Any]) -> str:
    return row["url"] if row["transport"] == "http" else " ".join(row["command"])


def _list(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        rows = _rows(harness)
    lines = [f"{r['name']}\t{r['transport']}\t{r['source']}\t{plural(r['tools'], 'tool')}\t{_target(r)}" for r in rows]
    return emit(out, args, rows, "\n".join(lines) or "No MCP servers mounted (`mcp-harness mcp add NAME -- CMD …`).")


def _show(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        spec = harness.mcp_servers().get(args.name)
        if spec is None:
            raise NotFound(f"No MCP server named {args.name} is mounted. `mcp-harness mcp list` shows them.")
        records = harness.upstream_store.tools([args.name])
    tools = [{"name": r.name, "cid": r.cid, "summary": r.document.summary} for r in records]
    data = {**spec.to_json(), "tools": tools}
    lines = [f"{spec.name} ({spec.transport}, from {spec.source}): {_target(data)}", f"timeout: {spec.timeout_s:g}s"]
    lines += [f"- {t['name']} — {t['summary']}" for t in tools] or ["(no tools listed yet: `mcp refresh`)"]
    return emit(out, args, data, "\n".join(lines))


def _remove(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        if args.name in {s.name for s in harness.settings.mcp.servers}:
            raise Conflict(f"MCP server {args.name} is defined in the config ([[mcp.servers]]); remove it there.")
        if not harness.upstream_store.remove_server(args.name):
            raise NotFound(f"No MCP server named {args.name} is mounted. `mcp-harness mcp list` shows them.")
    return emit(out, args, {"removed": args.name}, f"Unmounted MCP server {args.name}.")


def _refresh(args: argparse.Namespace, out: Any) -> int:
    results: list[dict[str, Any]] = []
    failed = False
    with opened(args) as harness:
        names = list(harness.mcp_servers())
        if args.name is not None:
            if args.name not in names:
                raise NotFound(f"No MCP server named {args.name} is mounted. `mcp-harness mcp list` shows them.")
            names = [args.name]
        for name in names:
            try:
                report = anyio.run(harness.upstreams.refresh, name)
                results.append({"name": name, **report.to_json()})
            except HarnessError as exc:
                failed = True
                results.append({"name": name, "error": exc.message})
    lines = []
    for r in results:
        if "error" in r:
            lines.append(f"{r['name']}: {r['error']}")
        else:
            lines.append(
                f"{r['name']}: {len(r['added'])} added, {len(r['changed'])} changed, {len(r['removed'])} removed, "
                f"{r['unchanged']} unchanged"
            )
    code = emit(out, args, results if args.name is None else results[0], "\n".join(lines) or "No MCP servers.")
    return EXIT_FAILURE if failed else code
