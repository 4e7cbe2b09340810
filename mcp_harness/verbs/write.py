"""The `write` verb: the mirror of `read`, one dispatcher over the address spaces (HARNESS §3, §12)."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import parse_address
from mcp_harness.errors import BadRequest
from mcp_harness.spaces._unsupported import WRITABLE_LATER, not_in_this_build
from mcp_harness.spaces.registry import supported_write_forms, write_space
from mcp_harness.verbs.base import VerbContext, VerbResult, options_of


def write(ctx: VerbContext, arguments: dict[str, Any]) -> VerbResult:
    """Write what `arguments["address"]` names."""
    raw = arguments.get("address")
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise BadRequest(f"write requires an address. Supported: {supported_write_forms()}.")
    dry_run = arguments.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise BadRequest("write dryRun must be a boolean.")
    address = parse_address(text)
    space = write_space(address.kind) if address is not None else None
    if dry_run is not None and (space is None or not space.dry_run):
        raise BadRequest("dryRun is only for hm:// writes; memory writes take effect at once.")
    options = options_of(arguments)
    if address is not None and space is not None and space.write is not None and space.writes(address):
        return space.write(ctx, address, arguments.get("content"), options, dry_run is True)
    if address is not None and address.kind in WRITABLE_LATER and not address.listing:
        raise not_in_this_build(address.kind, supported_write_forms())
    raise BadRequest(f"Unrecognized write address: {text}. Supported: {supported_write_forms()}.")
