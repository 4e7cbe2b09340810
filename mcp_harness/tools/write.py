"""The `write` verb: the mirror of `read` (HARNESS §3, §12). Memory writes are atomic whole-file replaces."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import parse_address
from mcp_harness.errors import BadRequest
from mcp_harness.space.paths import normalize_memory_path
from mcp_harness.tools._unsupported import not_in_this_build
from mcp_harness.tools.base import VerbContext, VerbResult, options_of, refuse_unknown_options

SUPPORTED_WRITE_FORMS = "~/memory/<path> (with content, or options {delete: true})"
MEMORY_OPTIONS = ("delete", "fromUrl", "fromAttachment")


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
    if address.kind != "memory":
        raise not_in_this_build(address.kind, SUPPORTED_WRITE_FORMS)
    return write_memory(ctx, address.rest, arguments.get("content"), options)


def write_memory(ctx: VerbContext, rest: str, content: object, options: dict[str, Any]) -> VerbResult:
    refuse_unknown_options("write ~/memory", options, MEMORY_OPTIONS)
    path = normalize_memory_path(rest)
    memory = ctx.harness.memory(ctx.agent)
    if "delete" in options:
        if not isinstance(options["delete"], bool):
            raise BadRequest("write ~/memory option delete must be true (or left out).")
        if options["delete"]:
            deleted = memory.delete(path)
            summary = f"Deleted {path}." if deleted else f"Nothing existed at {path}."
            return VerbResult.of({"summary": summary, "path": path, "deleted": deleted})
    for key in ("fromUrl", "fromAttachment"):
        if key in options:
            raise BadRequest(
                f"write ~/memory option {key} is not available in this build of mcp-harness. "
                "Supported here: content, or options {delete: true}."
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
