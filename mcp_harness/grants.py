"""May this agent do X? The one place the grant rules live (HARNESS §5).

`definition.tools` lists grants: callable tool names (legacy `execute_code` means `execute`) and the `publish`
pseudo-grant (also implied by the legacy names `write`, `memory_publish_document`, `ipfs_write`,
`attachment_to_ipfs`). Unset `tools` grants everything. Verbs are never grants. A callable is usable only when it is
both granted and offered by this host (the sandbox for `execute`, an engine for `search` / `web_search`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from mcp_harness.tools.contracts import CALLABLES, callable_alias

if TYPE_CHECKING:
    from mcp_harness.definition import AgentDefinition
    from mcp_harness.harness import Harness

Capability = Literal["search", "web_search", "execute", "publish"]
CAPABILITIES: tuple[Capability, ...] = ("search", "web_search", "execute", "publish")
LEGACY_PUBLISH_NAMES = frozenset({"publish", "write", "memory_publish_document", "ipfs_write", "attachment_to_ipfs"})


def granted(definition: AgentDefinition, capability: Capability) -> bool:
    """Whether the definition grants `capability`, whatever this host offers."""
    tools = definition.tools
    if tools is None:
        return True
    if capability == "publish":
        return any(t in LEGACY_PUBLISH_NAMES for t in tools)
    return any(callable_alias(t) == capability for t in tools)


def callable_set(harness: Harness, definition: AgentDefinition) -> list[str]:
    """Callables the agent may use here — granted and offered — in registry order. Blocking on first use."""
    offered = harness.offered_callables()
    return [name for name in CALLABLES if name in offered and granted(definition, name)]  # pyright: ignore[reportArgumentType]


def may(harness: Harness, definition: AgentDefinition, capability: Capability) -> bool:
    """May this agent do `capability` on this host now? Every gated operation asks this."""
    if capability == "publish":
        return granted(definition, "publish")
    return capability in callable_set(harness, definition)


def effective_grants(harness: Harness, definition: AgentDefinition) -> dict[str, Any]:
    """What `~/self` shows: the usable callables and whether the agent may publish."""
    return {"callableTools": callable_set(harness, definition), "publish": granted(definition, "publish")}
