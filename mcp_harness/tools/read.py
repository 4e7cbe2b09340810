"""The `read` verb: one dispatcher keyed by the shape of the address (HARNESS §3, §11)."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import SUPPORTED_READ_FORMS, Address, parse_address
from mcp_harness.errors import BadRequest, HarnessError, NotFound
from mcp_harness.space.paths import normalize_memory_path
from mcp_harness.tools import catalog, threads
from mcp_harness.tools._unsupported import not_in_this_build
from mcp_harness.tools.base import VerbContext, VerbResult, options_of
from mcp_harness.tools.plan import plan_markdown


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
            return read_memory(ctx, address, fmt)
        case "self":
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
            from mcp_harness.tools.hm_read import read_hm

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

        document = read_seed_url(ctx.harness.web, address.rest)
        if document is not None:
            return VerbResult.of(document, fmt=fmt) if fmt == "json" else VerbResult.of(document, document["markdown"])
    data = read_url(ctx.harness.web, address.rest, options, ctx.harness.settings.web.max_page_bytes)
    if fmt == "json":
        return VerbResult.of(data, fmt=fmt)
    return VerbResult.of(data, data["markdown"] or None)


def read_memory(ctx: VerbContext, address: Address, fmt: str) -> VerbResult:
    memory = ctx.harness.memory(ctx.agent)
    path = normalize_memory_path(address.rest, allow_root=True)
    if address.listing or path == "":
        return _listing(ctx, path, fmt)
    try:
        file = memory.read_file(path)
    except HarnessError as original:
        # A bare directory name reads as its listing; if that fails too, the file error is the honest one.
        try:
            return _listing(ctx, path, fmt)
        except HarnessError:
            if isinstance(original, NotFound) and "\\" in address.rest:
                # Likely a name copied from a listing, where unaddressable names are shown escaped.
                raise NotFound(f"{original.message} {_BACKSLASH_HINT}") from None
            raise original from None
    entry = file.entry
    data: dict[str, Any] = {"path": entry.path, "size": entry.size, "updatedAt": entry.updated_at}
    if entry.mime_type:
        data["mimeType"] = entry.mime_type
    if file.text is None:
        kind = f", {entry.mime_type}" if entry.mime_type else ""
        data = {
            "summary": f"{path} is a binary file ({entry.size} bytes{kind}); content not shown. Process it with a "
            "sandboxed tool or publish it once those are available.",
            **data,
            "encoding": "binary",
        }
        return VerbResult.of(data, fmt=fmt)
    data = {"summary": f"Read {path} ({entry.size} bytes).", **data, "encoding": "utf8", "content": file.text}
    if fmt == "json":
        return VerbResult.of(data, fmt=fmt)
    return VerbResult(data, file.text)


_BACKSLASH_HINT = (
    "A backslash separates directories in an address; a listing shows a name no address can carry (not UTF-8, or "
    "with a control character or a backslash) escaped and marked not addressable. Rename such a file with call "
    "execute, or delete the directory holding it."
)
_UNADDRESSABLE_NOTE = "not addressable: rename it with call execute"


def _listing(ctx: VerbContext, path: str, fmt: str) -> VerbResult:
    listing = ctx.harness.memory(ctx.agent).list_dir(path)
    files = [e for e in listing.entries if e.type == "file"]
    dirs = [e for e in listing.entries if e.type == "dir"]
    where = f"{path}/" if path else "Memory root"
    if not listing.entries:
        summary = f"{where} is empty."
    else:
        summary = f"{where} holds {len(files)} file{'s' if len(files) != 1 else ''} ({listing.total_bytes} bytes)"
        if dirs:
            noun = "directory" if len(dirs) == 1 else "directories"
            summary += f" and {len(dirs)} {noun} (read a directory address to see inside)"
        summary += "."
        if bad := listing.unaddressable:
            summary += (
                f" {bad} name{'s' if bad != 1 else ''} cannot be addressed (not UTF-8, or with a control character "
                "or a backslash) and " + ("is" if bad == 1 else "are") + " shown escaped: rename with call execute."
            )
    data = {
        "summary": summary,
        "path": path,
        "entries": [e.to_json() for e in listing.entries],
        "totalBytes": listing.total_bytes,
    }
    lines = [
        (
            f"- {e.path}/ ({e.entry_count} entr{'y' if e.entry_count == 1 else 'ies'}"
            if e.type == "dir"
            else f"- {e.path} ({e.size} bytes"
        )
        + ("" if e.addressable else f"; {_UNADDRESSABLE_NOTE}")
        + ")"
        for e in listing.entries
    ]
    return VerbResult.of(data, "\n".join(lines) or None, fmt=fmt)


def read_self(ctx: VerbContext, fmt: str) -> VerbResult:
    agent = ctx.agent
    definition = agent.definition
    summary_top = ctx.harness.memory(agent).summarize_top_level()
    count = ctx.harness.agents.count_sessions(agent.id)
    grants = ctx.harness.grants(definition)
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
    identities: list[Any] = []
    if definition.signing_key or definition.signing_keys:
        # Imported here: only agents granted signing identities pay for loading the identity module (and PyNaCl).
        from mcp_harness.identity.identities import identities_of

        identities = identities_of(ctx.harness, definition)
    if identities:
        data["signingKeys"] = [{"name": i.name, "label": i.label, "accountId": i.account_id} for i in identities]
    if definition.metadata:
        data["metadata"] = definition.metadata
    data["triggers"] = []
    data["memory"] = {"totalFiles": summary_top.total_files, "topLevel": summary_top.top_level}
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
    body = (
        f"## System prompt\n\n{definition.system_prompt}\n\n## Grants\n\n"
        f"- callable tools: {', '.join(grants['callableTools']) or '(none in this build)'}\n"
        f"- publish: {'yes' if grants['publish'] else 'no'}\n\n"
        f"## Memory ({summary_top.total_files} files)\n\n{memory_lines}"
    )
    if identities:
        signing_lines = "\n".join(f"- {i.label}: {i.account_id} (signing key `{i.name}`)" for i in identities)
        body += f"\n\n## Signing identities\n\n{signing_lines}"
    return VerbResult.of(data, body, fmt=fmt)


def read_tools(ctx: VerbContext, address: Address, fmt: str) -> VerbResult:
    if address.listing:
        listing = catalog.tools_listing(ctx)
        return VerbResult.of(listing, listing["markdown"], fmt=fmt)
    return catalog.read_tool(ctx, address.rest, fmt)


def read_plan(ctx: VerbContext, fmt: str) -> VerbResult:
    plan = ctx.harness.sessions.get_plan(ctx.session_id) if ctx.session_id else None
    steps: list[dict[str, Any]] = list(plan.get("steps", [])) if plan else []
    if not steps:
        data: dict[str, Any] = {"summary": "This conversation has no plan.", "steps": []}
        return VerbResult.of(data, fmt=fmt)
    settled = sum(1 for s in steps if s["status"] in ("done", "failed", "skipped"))
    data = {"summary": f"Plan: {settled} of {len(steps)} steps settled.", **(plan or {})}
    return VerbResult.of(data, plan_markdown(plan or {}), fmt=fmt)
