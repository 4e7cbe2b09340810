"""The builtin callables, each declared once: contract, grant, availability on this host, and handler.

A builtin is usable by an agent when its grant is in the agent's definition (`grants.py`) and this host offers it
(`CallableTool.available`). Authored tools (lambdas, `lambdas.py` + `documents.py`) are the other kind of callable:
`resolve` finds either for `call`, builtins here and lambdas in the agent's tool store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcp_harness.callables.execute import EXECUTE, execute, narrowed
from mcp_harness.callables.search_spec import SEARCH
from mcp_harness.callables.web_search import WEB_SEARCH, web_search
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.spec import VerbSpec

if TYPE_CHECKING:
    from mcp_harness.config import Settings
    from mcp_harness.sandbox import Sandbox
    from mcp_harness.store.tools import ToolRecord, ToolStore

CallableGrant = Literal["search", "web_search", "execute"]
"""The grants builtins need; `grants.Capability` adds `publish`, which no callable carries."""

Handler = Callable[[VerbContext, dict[str, Any]], Awaitable[VerbResult]]


class BuiltinHost(Protocol):
    """What decides whether this host offers a builtin, and why not: its settings and its sandbox."""

    @property
    def settings(self) -> Settings: ...
    @property
    def sandbox(self) -> Sandbox: ...
    def sandbox_runtimes(self) -> tuple[str, ...]: ...


class ToolLookup(Protocol):
    """Where an agent's authored tools are found."""

    @property
    def tools(self) -> ToolStore: ...


async def _search(ctx: VerbContext, tool_input: dict[str, Any]) -> VerbResult:
    from mcp_harness.callables.search import search  # its stores and indexes load on the first search

    return await search(ctx, tool_input)


@dataclass(frozen=True, kw_only=True)
class CallableTool:
    """One builtin callable. Named so as not to shadow `typing.Callable`."""

    spec: VerbSpec
    """The contract as declared (every runtime, for `execute`); `contract` gives what a host serves."""
    grant: CallableGrant
    """The grant in `definition.tools` it needs."""
    available: Callable[[BuiltinHost], bool]
    """Whether this host can run it (may probe the sandbox: blocking on first use)."""
    unavailable: Callable[[BuiltinHost], str]
    """Why this host cannot, for `~/self`'s `unavailableGrants` (asked only when `available` is false)."""
    handler: Handler | None
    """What runs a validated input; None for a contract without an engine in this build."""
    narrow: Callable[[VerbSpec, tuple[str, ...]], VerbSpec] | None = None
    """How the contract follows the host's sandbox runtimes (`execute` names only the offered ones)."""

    @property
    def name(self) -> str:
        return self.spec.name

    def contract(self, runtimes: tuple[str, ...]) -> VerbSpec:
        """The contract a host whose sandbox offers `runtimes` serves."""
        return self.narrow(self.spec, runtimes) if self.narrow is not None else self.spec

    def reason_unavailable(self, host: BuiltinHost) -> str:
        """Why `host` does not offer this builtin, naming what would fix it. Meaningful only when it does not."""
        return self.unavailable(host)


def _sandbox_missing(host: BuiltinHost) -> str:
    reason = host.sandbox.unavailable_reason() or "the sandbox offers no runtime"
    return f"granted, but this host cannot run the sandbox: {reason} — run `mcp-harness doctor`."


BUILTINS: tuple[CallableTool, ...] = (
    CallableTool(
        spec=SEARCH,
        grant="search",
        available=lambda host: True,  # keyword search needs nothing; semantic refuses by itself without an embedder
        unavailable=lambda host: "",
        handler=_search,
    ),
    CallableTool(
        spec=WEB_SEARCH,
        grant="web_search",
        available=lambda host: bool(host.settings.web.searxng_url),
        unavailable=lambda host: (
            "granted, but this host has no search engine: set [web] searxng_url (a SearXNG instance) in the config."
        ),
        handler=web_search,
    ),
    CallableTool(
        spec=EXECUTE,
        grant="execute",
        available=lambda host: bool(host.sandbox_runtimes()),
        unavailable=_sandbox_missing,
        handler=execute,
        narrow=narrowed,
    ),
)
"""In listing order: listings, `~/self` and grant messages name them in this order."""

BY_NAME: dict[str, CallableTool] = {tool.name: tool for tool in BUILTINS}

CALLABLES: dict[str, VerbSpec] = {tool.name: tool.spec for tool in BUILTINS}
"""The builtin callable tools, in listing order (HARNESS §4: materialized per agent as tool documents)."""

CALLABLE_ALIASES = {"execute_code": "execute"}
"""Legacy names still found in stored definitions (`normalizeSeedToolName`)."""

RESERVED_TOOL_NAMES = frozenset({*CALLABLES, "navigate", "read", "write", "call", "delegate", "plan", "status"}) | {
    "return_result"
}


def callable_alias(name: str) -> str:
    return CALLABLE_ALIASES.get(name, name)


def builtin(name: str) -> CallableTool | None:
    """The builtin named `name` (after legacy aliases), or None."""
    return BY_NAME.get(callable_alias(name))


def offered_callables(host: BuiltinHost) -> frozenset[str]:
    """Builtins this host can run. Blocking on first use (the sandbox probe)."""
    return frozenset(tool.name for tool in BUILTINS if tool.available(host))


def resolve(host: ToolLookup, agent_id: str, name: str, usable: Collection[str]) -> CallableTool | ToolRecord | None:
    """What `call` runs for `name`: a builtin in `usable` (granted and offered), else the agent's enabled authored
    tool of that name, else None. A builtin outside `usable` resolves like a name that does not exist. Blocking."""
    tool = BY_NAME.get(name)
    if tool is not None and name in usable:
        return tool
    record = host.tools.get(agent_id, name) if name else None
    return record if record is not None and record.kind == "lambda" and record.enabled else None
