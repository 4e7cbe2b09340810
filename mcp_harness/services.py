"""What the domain may ask of the composition root, as Protocols, so no domain module imports `Harness`.

`harness.py` is the top of the import graph: it builds the stores and services and hands them down. A module that
needs two of them takes those two (as arguments, or through a small Protocol of its own declared next to its use);
a verb reaches them through `VerbContext.services`, typed by the composite `Services` below, whose parts say which
concern each attribute belongs to. `Harness` satisfies every one of these structurally — pyright checks that where
the root passes itself down — and tests may pass anything that does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from mcp_harness.callables.upstream import ServerSpec, Upstreams
    from mcp_harness.config import Settings
    from mcp_harness.definition import AgentDefinition
    from mcp_harness.errors import HarnessError
    from mcp_harness.hypermedia.node import Node
    from mcp_harness.memory.store import MemoryStore
    from mcp_harness.models.providers import ProviderRegistry
    from mcp_harness.models.wire import Sampler
    from mcp_harness.runs.engine import RunEngine
    from mcp_harness.sandbox import Sandbox
    from mcp_harness.store import AgentRecord, AgentStore, Database, SessionStore
    from mcp_harness.store.attachments import AttachmentStore
    from mcp_harness.store.runs import RunStore
    from mcp_harness.store.secrets import SecretStore
    from mcp_harness.store.tools import ToolStore
    from mcp_harness.store.upstream_tools import UpstreamStore
    from mcp_harness.verbs.base import VerbContext, VerbResult
    from mcp_harness.verbs.spec import VerbSpec
    from mcp_harness.web.egress import Egress

T = TypeVar("T")


class Stores(Protocol):
    """The always-open stores of one database, and the account they serve."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    @property
    def account_id(self) -> str: ...
    @property
    def agents(self) -> AgentStore: ...
    @property
    def sessions(self) -> SessionStore: ...
    @property
    def tools(self) -> ToolStore: ...
    @property
    def runs(self) -> RunStore: ...
    @property
    def attachments(self) -> AttachmentStore: ...


class Memories(Protocol):
    """Each agent's memory tree."""

    def memory(self, agent: AgentRecord) -> MemoryStore: ...


class Hosting(Protocol):
    """What this host can run and reach: the sandbox, the guarded web client, the callables it offers."""

    @property
    def sandbox(self) -> Sandbox: ...
    @property
    def web(self) -> Egress: ...
    def sandbox_runtimes(self) -> tuple[str, ...]: ...
    def offered_callables(self) -> frozenset[str]: ...
    @property
    def upstream_store(self) -> UpstreamStore: ...
    @property
    def upstreams(self) -> Upstreams: ...
    def mcp_servers(self) -> dict[str, ServerSpec]: ...


class Keys(Protocol):
    """Sealed secrets and the hypermedia node the signing identities publish to."""

    @property
    def secrets(self) -> SecretStore: ...
    @property
    def hypermedia(self) -> Node: ...


class Models(Protocol):
    """Model providers, and the connected client's sampling when it offers one."""

    @property
    def providers(self) -> ProviderRegistry: ...
    @property
    def sampler(self) -> Sampler | None: ...


class Runs(Protocol):
    """The run engine, and the child runs an MCP client's delegate call in this process is waiting on."""

    @property
    def engine(self) -> RunEngine: ...
    @property
    def awaited_children(self) -> set[str]: ...


class Invoker(Protocol):
    """The one logged code path for a verb call (an agent loop or a script calls verbs through it)."""

    def invoke_sync(
        self, ctx: VerbContext, verb: str, arguments: dict[str, Any], call_id: str | None = None
    ) -> tuple[VerbResult | None, HarnessError | None]: ...

    async def invoke_async(
        self, ctx: VerbContext, verb: str, arguments: dict[str, Any], call_id: str | None = None
    ) -> tuple[VerbResult | None, HarnessError | None]: ...

    async def start_async(
        self, ctx: VerbContext, verb: str, arguments: dict[str, Any], start: Callable[[VerbContext], Awaitable[T]]
    ) -> tuple[T | None, HarnessError | None]: ...


class Agents(Protocol):
    """Agents by name, checked definitions, and what a definition is granted on this host."""

    def agent(self, name_or_id: str | None = None) -> AgentRecord: ...
    def check_definition(self, definition: AgentDefinition) -> None: ...
    def grants(self, definition: AgentDefinition) -> dict[str, Any]: ...


class Contracts(Protocol):
    """The verbs' contracts, handed down rather than imported: the `~/tools` space lists them, and the read and write
    contracts are generated from the spaces, so importing them from a space would close a cycle."""

    @property
    def verbs(self) -> Mapping[str, VerbSpec]: ...


class Services(Stores, Memories, Hosting, Keys, Models, Runs, Invoker, Agents, Contracts, Protocol):
    """Everything a verb may reach, by concern. Only `VerbContext` carries the whole; seams take a part."""
