"""The `write` verb: the mirror of `read` (HARNESS §3, §12). Memory writes are atomic whole-file replaces."""

from __future__ import annotations

import json
from typing import Any

from mcp_harness.addresses import parse_address
from mcp_harness.callables.documents import LAMBDA_SHAPE, validate_lambda
from mcp_harness.errors import BadRequest
from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.spaces._unsupported import not_in_this_build
from mcp_harness.verbs.base import VerbContext, VerbResult, options_of, refuse_unknown_options
from mcp_harness.verbs.contracts import CALLABLES

SUPPORTED_WRITE_FORMS = (
    "~/memory/<path> (with content, or options {delete: true} / {fromUrl}), ~/tools/<name> (JSON content, or options "
    "{tool} / {delete: true}), hm://<account>/<path> (markdown content; options.action document | update | comment | "
    "move | redirect | delete | fork)"
)
MEMORY_OPTIONS = ("delete", "fromUrl", "fromAttachment")
TOOL_OPTIONS = ("delete", "tool")


def write(ctx: VerbContext, arguments: dict[str, Any]) -> VerbResult:
    """Write what `arguments["address"]` names."""
    raw = arguments.get("address")
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise BadRequest(f"write requires an address. Supported: {SUPPORTED_WRITE_FORMS}.")
    dry_run = arguments.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise BadRequest("write dryRun must be a boolean.")
    address = parse_address(text)
    if dry_run is not None and (address is None or address.kind != "hm"):
        raise BadRequest("dryRun is only for hm:// writes; memory writes take effect at once.")
    options = options_of(arguments)
    if address is None or address.kind not in ("memory", "tools", "triggers", "ipfs", "hm"):
        raise BadRequest(f"Unrecognized write address: {text}. Supported: {SUPPORTED_WRITE_FORMS}.")
    if address.kind in ("tools", "triggers") and address.listing:
        raise BadRequest(f"Unrecognized write address: {text}. Supported: {SUPPORTED_WRITE_FORMS}.")
    if address.kind == "tools":
        return write_tool(ctx, address.rest, arguments.get("content"), options)
    if address.kind == "hm":
        from mcp_harness.spaces.hm.write import write_hm

        return write_hm(ctx, text, arguments.get("content"), options, dry_run is True)
    if address.kind != "memory":
        raise not_in_this_build(address.kind, SUPPORTED_WRITE_FORMS)
    return write_memory(ctx, address.rest, arguments.get("content"), options)


def write_tool(ctx: VerbContext, name: str, content: object, options: dict[str, Any]) -> VerbResult:
    """Author, replace or delete a lambda (HARNESS §4, §12)."""
    refuse_unknown_options(f"write ~/tools/{name}", options, TOOL_OPTIONS)
    tools = ctx.services.tools
    if options.get("delete") is True:
        existing = tools.get(ctx.agent.id, name)
        if name in CALLABLES or (existing is not None and existing.kind == "builtin"):
            raise BadRequest(f'"{name}" is a builtin tool; disable it via the agent\'s tool grants instead.')
        deleted = tools.delete_lambda(ctx.agent.id, name)
        summary = f"Deleted tool {name}." if deleted else f"No authored tool named {name}; nothing to delete."
        return VerbResult.of({"summary": summary, "name": name, "deleted": deleted})
    if "delete" in options and not isinstance(options["delete"], bool):
        raise BadRequest("write ~/tools option delete must be true (or left out).")
    if "tool" in options:
        body: object = options["tool"]
    elif isinstance(content, str):
        try:
            body = json.loads(content)
        except json.JSONDecodeError as exc:
            raise BadRequest(
                f"write ~/tools/{name} expects JSON content: {LAMBDA_SHAPE} ({exc.msg} at line {exc.lineno})."
            ) from None
    else:
        raise BadRequest(f"write ~/tools/{name} expects JSON content (or options.tool): {LAMBDA_SHAPE}.")
    doc = validate_lambda(name, body, ctx.services.sandbox_runtimes())
    cid = tools.save_lambda(ctx.agent.id, doc)
    summary = f"Saved tool {name} ({cid}). Call it by name with the call verb; its contract is live in ~/tools now."
    return VerbResult.of({"summary": summary, "name": name, "cid": cid, "kind": doc.kind})


def write_memory(ctx: VerbContext, rest: str, content: object, options: dict[str, Any]) -> VerbResult:
    refuse_unknown_options("write ~/memory", options, MEMORY_OPTIONS)
    if "fromUrl" in options:
        if content is not None or len(options) > 1:
            raise BadRequest("write ~/memory with fromUrl takes no content and no other option.")
        from mcp_harness.web.download import download_to_memory

        return VerbResult.of(download_to_memory(ctx.services, ctx.agent, rest, options["fromUrl"]))
    path = normalize_memory_path(rest)
    memory = ctx.services.memory(ctx.agent)
    if "delete" in options:
        if not isinstance(options["delete"], bool):
            raise BadRequest("write ~/memory option delete must be true (or left out).")
        if options["delete"]:
            deleted = memory.delete(path)
            summary = f"Deleted {path}." if deleted else f"Nothing existed at {path}."
            return VerbResult.of({"summary": summary, "path": path, "deleted": deleted})
    if "fromAttachment" in options:
        raise BadRequest(
            "write ~/memory option fromAttachment is not available in this build of mcp-harness. "
            "Supported here: content, or options {delete: true} / {fromUrl}."
        )
    if not isinstance(content, str):
        raise BadRequest(
            "write to ~/memory requires content (or options.delete / options.fromUrl / options.fromAttachment)."
        )
    try:
        data_bytes = content.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest("content is not valid Unicode text (it holds a lone surrogate); send valid UTF-8.") from None
    entry = memory.write_file(path, data_bytes)
    data = {"summary": f"Wrote {path} ({entry.size} bytes).", **entry.to_json()}
    return VerbResult.of(data)
