"""The `read` verb: one dispatcher keyed by the shape of the address (HARNESS §3, §11)."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import SUPPORTED_READ_FORMS, Address, parse_address
from mcp_harness.callables import catalog
from mcp_harness.errors import BadRequest
from mcp_harness.spaces import threads
from mcp_harness.spaces._unsupported import not_in_this_build
from mcp_harness.spaces.memory import read_memory
from mcp_harness.verbs.base import VerbContext, VerbResult, options_of, refuse_unknown_options
from mcp_harness.verbs.contracts import CALLABLES
from mcp_harness.verbs.plan import plan_markdown

__all__ = ["read", "read_memory", "read_plan", "read_self", "read_tools", "read_web"]


def read(ctx: VerbContext, arguments: dict[str, Any]) -> VerbResult:
    """Read what `arguments["address"]` names."""
    raw = arguments.get("address")
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise BadRequest(f"read requires an address. Supported: {SUPPORTED_READ_FORMS}.")
    fmt = "json" if arguments.get("format") == "json" else "markdown"
    address = parse_address(text)
    if address is None:
        raise BadRequest(f"Unrecognized address: {text}. Supported: {SUPPORTED_READ_FORMS}.")
    options = options_of(arguments)
    match address.kind:
        case "memory":
            return read_memory(ctx, address, fmt, options)
        case "self":
            refuse_unknown_options("read ~/self", options, ())
            return read_self(ctx, fmt)
        case "tools":
            return read_tools(ctx, address, fmt)
        case "plan":
            return read_plan(ctx, fmt)
        case "thread" if address.listing:
            return threads.list_threads(ctx, options, fmt)
        case "thread":
            return threads.read_thread(ctx, address.rest, fmt)
        case "run" if address.rest:
            return threads.read_run(ctx, address.rest, fmt)
        case "hm":
            from mcp_harness.spaces.hm.read import read_hm

            return read_hm(ctx, address.rest, fmt)
        case "web":
            return read_web(ctx, address, options, fmt)
        case _:
            raise not_in_this_build(address.kind, SUPPORTED_READ_FORMS)


def read_web(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    """A public page as markdown through the guarded client (blocking: this runs on a worker thread); a Seed
    document behind an https URL is read as that document first (web/seed_sites.py)."""
    from mcp_harness.web.reader import read_url

    if address.rest.lower().startswith("https://") and not options.get("raw"):
        from mcp_harness.web.seed_sites import read_seed_url

        document = read_seed_url(ctx.services.web, address.rest)
        if document is not None:
            return VerbResult.of(document, fmt=fmt) if fmt == "json" else VerbResult.of(document, document["markdown"])
    data = read_url(ctx.services.web, address.rest, options, ctx.services.settings.web.max_page_bytes)
    if fmt == "json":
        return VerbResult.of(data, fmt=fmt)
    return VerbResult.of(data, data["markdown"] or None)


def read_self(ctx: VerbContext, fmt: str) -> VerbResult:
    agent = ctx.agent
    definition = agent.definition
    summary_top = ctx.services.memory(agent).summarize_top_level()
    count = ctx.services.agents.count_sessions(agent.id)
    grants = ctx.services.grants(definition)
    data: dict[str, Any] = {
        "summary": f'You are "{definition.name}" ({definition.model}) with 0 triggers and {count} '
        f"conversation{'s' if count != 1 else ''}.",
        "agentId": agent.id,
        "name": definition.name,
        "model": definition.model,
        "modelProvider": definition.model_provider,
    }
    if definition.reasoning_level:
        data["reasoningLevel"] = definition.reasoning_level
    data["systemPrompt"] = definition.system_prompt
    data["grants"] = grants
    unavailable = unavailable_grants(ctx, grants["callableTools"])
    if unavailable:
        data["unavailableGrants"] = unavailable
    identities: list[Any] = []
    if definition.signing_key or definition.signing_keys:
        # Imported here: only agents granted signing identities pay for loading the identity module (and PyNaCl).
        from mcp_harness.identity.identities import identities_of

        identities = identities_of(ctx.services, definition)
    if identities:
        data["signingKeys"] = [{"name": i.name, "label": i.label, "accountId": i.account_id} for i in identities]
    if definition.metadata:
        data["metadata"] = definition.metadata
    data["triggers"] = []
    data["memory"] = {"totalFiles": summary_top.total_files, "topLevel": summary_top.top_level}
    if not summary_top.complete:
        data["memory"]["totalFilesAtLeast"] = True  # the count stopped at its bound (memory/listing.py)
    if summary_top.more_top_level:
        data["memory"]["moreTopLevel"] = summary_top.more_top_level
    if summary_top.unaddressable:
        data["memory"]["unaddressableFiles"] = summary_top.unaddressable
    data["sessionCount"] = count
    data["guidance"] = [
        "Your memory (~/memory/) is yours to read and write freely; writes replace whole files.",
        "read ~/tools/ lists what you can do; read ~/tools/<name> gives a full contract.",
        "read thread: lists your conversations; thread:<id> reads one.",
        "Your definition (prompt, model, grants) is edited by your user, not by you.",
    ]
    memory_lines = "\n".join(f"- {line}" for line in summary_top.top_level) or "- (empty)"
    if summary_top.more_top_level:
        memory_lines += f"\n- … and {summary_top.more_top_level} more (read ~/memory/ to page through them)"
    counted = f"{'≥ ' if not summary_top.complete else ''}{summary_top.total_files} files"
    missing = "".join(f"- {u['tool']}: {u['reason']}\n" for u in unavailable)
    body = (
        f"## System prompt\n\n{definition.system_prompt}\n\n## Grants\n\n"
        f"- callable tools: {', '.join(grants['callableTools']) or '(none in this build)'}\n"
        f"- publish: {'yes' if grants['publish'] else 'no'}\n{missing}\n"
        f"## Memory ({counted})\n\n{memory_lines}"
    )
    if identities:
        signing_lines = "\n".join(f"- {i.label}: {i.account_id} (signing key `{i.name}`)" for i in identities)
        body += f"\n\n## Signing identities\n\n{signing_lines}"
    return VerbResult.of(data, body, fmt=fmt)


def unavailable_grants(ctx: VerbContext, usable: list[str]) -> list[dict[str, str]]:
    """Callables the definition grants that this host cannot run, each with why and what would fix it."""
    from mcp_harness.grants import granted

    out: list[dict[str, str]] = []
    for name in CALLABLES:
        if name not in usable and granted(ctx.agent.definition, name):  # pyright: ignore[reportArgumentType]
            out.append({"tool": name, "reason": _why_not_here(ctx, name)})
    return out


def _why_not_here(ctx: VerbContext, name: str) -> str:
    if name == "execute":
        reason = ctx.services.sandbox.unavailable_reason() or "the sandbox offers no runtime"
        return f"granted, but this host cannot run the sandbox: {reason} — run `mcp-harness doctor`."
    if name == "web_search":
        return "granted, but this host has no search engine: set [web] searxng_url (a SearXNG instance) in the config."
    if name == "search":
        return "granted, but this build has no hypermedia search engine to run it."
    return "granted, but this host does not offer it."


def read_tools(ctx: VerbContext, address: Address, fmt: str) -> VerbResult:
    if address.listing:
        listing = catalog.tools_listing(ctx)
        return VerbResult.of(listing, listing["markdown"], fmt=fmt)
    return catalog.read_tool(ctx, address.rest, fmt)


def read_plan(ctx: VerbContext, fmt: str) -> VerbResult:
    plan = ctx.services.sessions.get_plan(ctx.session_id) if ctx.session_id else None
    steps: list[dict[str, Any]] = list(plan.get("steps", [])) if plan else []
    if not steps:
        data: dict[str, Any] = {"summary": "This conversation has no plan.", "steps": []}
        return VerbResult.of(data, fmt=fmt)
    settled = sum(1 for s in steps if s["status"] in ("done", "failed", "skipped"))
    data = {"summary": f"Plan: {settled} of {len(steps)} steps settled.", **(plan or {})}
    return VerbResult.of(data, plan_markdown(plan or {}), fmt=fmt)
