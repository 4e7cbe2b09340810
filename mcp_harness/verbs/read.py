"""The `read` verb: one dispatcher over the address spaces (HARNESS §3, §11; spaces/registry.py)."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import parse_address
from mcp_harness.errors import BadRequest
from mcp_harness.spaces._unsupported import not_in_this_build
from mcp_harness.spaces.registry import read_space, supported_read_forms
from mcp_harness.verbs.base import VerbContext, VerbResult, options_of


def read(ctx: VerbContext, arguments: dict[str, Any]) -> VerbResult:
    """Read what `arguments["address"]` names."""
    raw = arguments.get("address")
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise BadRequest(f"read requires an address. Supported: {supported_read_forms()}.")
    fmt = "json" if arguments.get("format") == "json" else "markdown"
    address = parse_address(text)
    if address is None:
        raise BadRequest(f"Unrecognized address: {text}. Supported: {supported_read_forms()}.")
    options = options_of(arguments)
    space = read_space(address.kind)
    if space is None or space.read is None or not space.reads(address):
        raise not_in_this_build(address.kind, supported_read_forms())
    return space.read(ctx, address, options, fmt)
