"""`mcp-harness agent …`: the owner creates, lists, shows, updates and deletes agents.

Everything a definition names is checked here before it is stored: the name rule, the model provider and its
model, the grants, and the signing identities (`--signing-key` takes a label, account id or secret name and stores
the secret name, which survives a relabelling).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_harness.cli._common import command_flags, emit, fmt_time, opened
from mcp_harness.definition import AgentDefinition, check_agent_name, normalize_definition
from mcp_harness.errors import BadRequest, NotFound

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.store import AgentRecord


def register(sub: Any) -> None:
    agent = sub.add_parser("agent", help="create, list, show, update or delete agents")
    agent_sub = agent.add_subparsers(dest="action", required=True)
    create = agent_sub.add_parser("create", help="create an agent")
    create.add_argument("name", help="1-64 of a-z 0-9 _ -, starting with a letter or digit")
    _definition_flags(create, create=True)
    create.set_defaults(handler=_create)
    listing = agent_sub.add_parser("list", help="list agents, most recently updated first")
    listing.set_defaults(handler=_list)
    show = agent_sub.add_parser("show", help="show an agent's definition, its prompt as markdown")
    show.set_defaults(handler=_show)
    update = agent_sub.add_parser("update", help="change an agent's definition")
    _definition_flags(update, create=False)
    update.set_defaults(handler=_update)
    delete = agent_sub.add_parser("delete", help="delete an agent, its sessions and its memory")
    delete.set_defaults(handler=_delete)
    for p in (show, update, delete):
        p.add_argument("name", help="agent name or id")
    for p in (create, listing, show, update, delete):
        command_flags(p)


def _definition_flags(parser: argparse.ArgumentParser, *, create: bool) -> None:
    parser.add_argument("--system-prompt", help="the agent's system prompt (markdown)")
    parser.add_argument("--system-prompt-file", type=Path, help="read the system prompt from a file")
    parser.add_argument("--model-provider", help="model provider name" + (" (default: [agent] in config)" * create))
    parser.add_argument("--model", help="model id (default: the provider's default model)")
    parser.add_argument("--reasoning-level", help="minimal, low, medium, high or xhigh (if the model supports it)")
    parser.add_argument("--tools", help='comma-separated grants, e.g. "search,execute,publish"; "" grants none')
    parser.add_argument(
        "--signing-key",
        action="append",
        default=[],
        metavar="IDENTITY",
        help="a signing identity it may publish as, by label, account id or secret name (repeatable)",
    )
    if not create:
        parser.add_argument("--rename", help="new name")
        parser.add_argument("--remove-signing-key", action="append", default=[], metavar="IDENTITY")
        parser.add_argument("--no-signing-keys", action="store_true", help="remove every signing identity first")


def _prompt_edit(args: argparse.Namespace) -> str | None:
    if args.system_prompt_file is not None:
        try:
            return args.system_prompt_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRequest(f"Cannot read {args.system_prompt_file}: {getattr(exc, 'strerror', exc)}.") from exc
    return args.system_prompt


def _model_of(harness: Harness, provider: str, agent: str) -> str:
    """The provider's default model for an agent given none; refused when the provider has none."""
    found = harness.providers.require(provider)
    model = harness.providers.default_model(provider)
    if model is None:
        fix = (
            f"model in [providers.{provider}]" if found.source == "config" else f"`provider add {provider} … --model M`"
        )
        raise BadRequest(
            f"Provider {provider!r} has no default model, so agent {agent!r} needs one: pass --model M, or give the "
            f"provider a default ({fix})."
        )
    return model


def _signing_names(harness: Harness, refs: list[str]) -> list[str]:
    if not refs:
        return []
    from mcp_harness.identity.identities import resolve_identity

    return [resolve_identity(harness, ref).name for ref in refs]


def _checked(harness: Harness, raw: dict[str, Any], authored: list[str], *, named: bool) -> AgentDefinition:
    """`raw` validated as a definition to store; `named`: its name is new (created or renamed) and takes the rule."""
    from mcp_harness.grants import check_grant_names

    if named:
        check_agent_name(raw["name"])
    check_grant_names(raw.get("tools"), authored)
    definition = normalize_definition(raw, provider_type=_provider_type(harness, raw["modelProvider"]))
    harness.check_definition(definition)
    return definition


def _provider_type(harness: Harness, name: str) -> str:
    return harness.providers.require(name).type


def _tools(args: argparse.Namespace) -> list[str] | None:
    return None if args.tools is None else [t.strip() for t in args.tools.split(",") if t.strip()]


def _create(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        a = harness.settings.agent
        check_agent_name(args.name)
        provider = args.model_provider or a.model_provider
        configured = provider == a.model_provider and a.model is not None
        model = args.model or (a.model if configured else None) or _model_of(harness, provider, args.name)
        raw: dict[str, Any] = {
            "name": args.name,
            "systemPrompt": _prompt_edit(args) or a.system_prompt,
            "modelProvider": provider,
            "model": model,
        }
        # [agent]'s reasoning level belongs to [agent]'s model; its signing keys to the default agent alone.
        level = args.reasoning_level or (a.reasoning_level if model == a.model else None)
        if level:
            raw["reasoningLevel"] = level
        tools = _tools(args) if args.tools is not None else a.tools
        if tools is not None:
            raw["tools"] = tools
        if args.signing_key:
            raw["signingKeys"] = _signing_names(harness, args.signing_key)
        record = harness.create_agent(_checked(harness, raw, [], named=True))
    return emit(out, args, record.to_json(), f"Created agent {args.name} ({record.id}).")


def _find(harness: Harness, name: str) -> AgentRecord:
    record = harness.agents.find(harness.account_id, name)
    if record is None:
        names = ", ".join(a.definition.name for a in harness.agents.list(harness.account_id)) or "none yet"
        raise NotFound(f"No agent named {name!r} (agents: {names}). `mcp-harness agent list` shows them.")
    return record


def _update(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        record = _find(harness, args.name)
        raw = record.definition.to_json()
        prompt = _prompt_edit(args)
        if prompt is not None:
            raw["systemPrompt"] = prompt
        if args.model_provider is not None and args.model_provider != raw["modelProvider"]:
            raw["modelProvider"] = args.model_provider
            if args.model is None:  # the old model belongs to the old provider
                raw["model"] = _model_of(harness, args.model_provider, record.definition.name)
        if args.model is not None:
            raw["model"] = args.model
        if args.reasoning_level is not None:
            raw["reasoningLevel"] = args.reasoning_level
        if args.tools is not None:
            raw["tools"] = _tools(args)
        if args.rename:
            raw["name"] = args.rename
        raw.update(_signing_edit(harness, record.definition, args))
        authored = [t.name for t in harness.tools.list(record.id) if t.kind == "lambda"]
        updated = harness.agents.update(record.id, _checked(harness, raw, authored, named=bool(args.rename)))
    return emit(out, args, updated.to_json(), f"Updated agent {updated.definition.name}.")


def _signing_edit(harness: Harness, definition: AgentDefinition, args: argparse.Namespace) -> dict[str, Any]:
    """`signingKey` / `signingKeys` after --no-signing-keys, --remove-signing-key and --signing-key, in that order."""
    if not (args.no_signing_keys or args.remove_signing_key or args.signing_key):
        return {}
    single, many = definition.signing_key, list(definition.signing_keys)
    if args.no_signing_keys:
        single, many = None, []
    for ref in args.remove_signing_key:
        held = {k for k in (single, *many) if k}
        # A name no identity answers to any more (deleted) is removed as written.
        name = ref if ref in held else _signing_names(harness, [ref])[0]
        if name not in held:
            raise NotFound(
                f"Agent {definition.name!r} has no signing key {ref!r}; it holds: {', '.join(held) or 'none'}."
            )
        single = None if single == name else single
        many = [k for k in many if k != name]
    many = list(dict.fromkeys([*many, *_signing_names(harness, args.signing_key)]))
    return {"signingKey": single, "signingKeys": many}


def _list(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        records = harness.agents.list(harness.account_id)
    lines = [
        f"{r.definition.name}\t{r.id}\t{r.definition.model_provider}/{r.definition.model}\t"
        f"updated {fmt_time(r.updated_at)}"
        for r in records
    ]
    empty = "No agents yet. `mcp-harness agent create NAME` makes one; serving creates the default."
    return emit(out, args, [r.to_json() for r in records], "\n".join(lines) or empty)


def _show(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        record = _find(harness, args.name)
        sessions = harness.agents.count_sessions(record.id)
    if args.json:
        return emit(out, args, record.to_json(), None)
    d = record.definition
    lines = [f"{d.name} ({record.id})", f"  model: {d.model_provider}/{d.model}"]
    if d.reasoning_level:
        lines.append(f"  reasoning level: {d.reasoning_level}")
    lines.append(f"  tools: {'all' if d.tools is None else ', '.join(d.tools) or 'none'}")
    keys = [k for k in (d.signing_key, *d.signing_keys) if k]
    lines.append(f"  signing keys: {', '.join(dict.fromkeys(keys)) or 'none'}")
    lines += [f"  sessions: {sessions}", f"  memory: {record.memory_dir}", "  system prompt:"]
    lines += [f"    {line}".rstrip() for line in d.system_prompt.splitlines()]
    return emit(out, args, None, "\n".join(lines))


def _delete(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        record = _find(harness, args.name)
        harness.agents.delete(record.id)
    return emit(out, args, {"deleted": record.id, "name": record.definition.name}, f"Deleted agent {args.name}.")
