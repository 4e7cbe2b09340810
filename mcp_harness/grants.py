"""May this agent do X? The one place the grant rules live (HARNESS §5).

`definition.tools` lists grants: callable tool names (legacy `execute_code` means `execute`) and the `publish`
pseudo-grant (also implied by the legacy names `write`, `memory_publish_document`, `ipfs_write`,
`attachment_to_ipfs`). Unset `tools` grants everything. Verbs are never grants. A callable is usable only when it is
both granted and offered by this host (the sandbox for `execute`, an engine for `search` / `web_search`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcp_harness.callables.registry import BUILTINS, CALLABLE_ALIASES, CALLABLES, CallableGrant, callable_alias
from mcp_harness.callables.upstream import split_name, tool_name
from mcp_harness.errors import BadRequest

if TYPE_CHECKING:
    from mcp_harness.definition import AgentDefinition

Capability = CallableGrant | Literal["publish"]
CAPABILITIES: tuple[Capability, ...] = (*(tool.grant for tool in BUILTINS), "publish")


class Offering(Protocol):
    """Which builtins this host offers (`Harness.offered_callables`, from the callables registry)."""

    def offered_callables(self) -> frozenset[str]: ...


LEGACY_PUBLISH_NAMES = frozenset({"publish", "write", "memory_publish_document", "ipfs_write", "attachment_to_ipfs"})


def granted(definition: AgentDefinition, capability: Capability) -> bool:
    """Whether the definition grants `capability`, whatever this host offers."""
    tools = definition.tools
    if tools is None:
        return True
    if capability == "publish":
        return any(t in LEGACY_PUBLISH_NAMES for t in tools)
    return any(callable_alias(t) == capability for t in tools)


def callable_set(host: Offering, definition: AgentDefinition) -> list[str]:
    """Callables the agent may use here — granted and offered — in registry order. Blocking on first use."""
    offered = host.offered_callables()
    return [tool.name for tool in BUILTINS if tool.name in offered and granted(definition, tool.grant)]


def upstream_granted(definition: AgentDefinition, name: str) -> bool:
    """Whether the definition grants upstream tool `mcp__<server>__<tool>`: by its exact name or by the server's
    wildcard `mcp__<server>__*` (unset `tools` grants every mounted server's tools, as it grants every builtin)."""
    parts = split_name(name)
    if parts is None:
        return False
    tools = definition.tools
    return tools is None or name in tools or tool_name(parts[0], "*") in tools


def server_granted(definition: AgentDefinition, server: str) -> bool:
    """Whether any of the server's tools is granted (what reading its resources, `mcp://<server>/…`, needs)."""
    tools = definition.tools
    return tools is None or any((parts := split_name(t)) is not None and parts[0] == server for t in tools)


def narrowed(parent: Iterable[str] | None, wanted: Iterable[str]) -> list[str]:
    """The upstream grants of `wanted` that `parent` covers (delegate's `tools` narrows, never widens): an exact
    name the parent grants exactly or by its server's wildcard, a wildcard the parent holds itself."""
    held = None if parent is None else set(parent)
    out: list[str] = []
    for name in dict.fromkeys(wanted):
        parts = split_name(name)
        if parts is None:
            continue
        if held is None or name in held or (parts[1] != "*" and tool_name(parts[0], "*") in held):
            out.append(name)
    return out


def may(host: Offering, definition: AgentDefinition, capability: Capability | str) -> bool:
    """May this agent do `capability` on this host now? Every gated operation asks this (an `mcp__…` name asks
    about an upstream tool)."""
    if split_name(capability) is not None:
        return upstream_granted(definition, capability)
    if capability == "publish":
        return granted(definition, "publish")
    return capability in callable_set(host, definition)


def effective_grants(host: Offering, definition: AgentDefinition) -> dict[str, Any]:
    """What `~/self` shows: the usable callables and whether the agent may publish."""
    return {"callableTools": callable_set(host, definition), "publish": granted(definition, "publish")}


def check_grant_names(tools: Iterable[str] | None, authored: Iterable[str] = ()) -> None:
    """Every grant must name something: a builtin callable, `publish`, a legacy alias of either, or one of the
    agent's authored tools. Checked when a definition is created or changed, never on load, so a stored grant a
    later version dropped does not lock its agent out.

    Raises:
        BadRequest: listing the unknown names and every accepted one.
    """
    if tools is None:
        return
    authored = sorted(set(authored))
    known = {*CALLABLES, *CALLABLE_ALIASES, *LEGACY_PUBLISH_NAMES, *authored}
    unknown = [t for t in dict.fromkeys(tools) if t not in known and split_name(t) is None]
    if unknown:
        legacy = sorted({*CALLABLE_ALIASES, *LEGACY_PUBLISH_NAMES} - {"publish"})
        mine = f"; this agent's tools: {', '.join(authored)}" if authored else ""
        noun = "grants" if len(unknown) > 1 else "grant"
        raise BadRequest(
            f"Unknown tool {noun}: {', '.join(unknown)}. Accepted: {', '.join(CALLABLES)}, publish "
            f"(legacy aliases: {', '.join(legacy)}), mcp__<server>__<tool> or mcp__<server>__* for a mounted MCP "
            f"server's tools{mine}."
        )
