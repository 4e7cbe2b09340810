"""Other MCP servers behind `call` (issue 20), as the domain sees them: names, mounts, documents and the seam.

An upstream tool is a tool document of kind `mcp` named `mcp__<server>__<tool>`. Server names never contain `_`, so
the name splits back unambiguously whatever the upstream tool is called. The MCP client itself lives in
`mcp_harness/upstream/` (the one domain-facing package that imports the SDK's client); the domain reaches it only
through `Upstreams` below, which the harness wires lazily.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import anyio
import anyio.from_thread

from mcp_harness.callables.documents import ToolDocument, summary_of
from mcp_harness.errors import BadRequest, Upstream

if TYPE_CHECKING:
    from mcp_harness.config import McpServerSettings
    from mcp_harness.store.upstream import SyncReport
    from mcp_harness.store.upstream_tools import UpstreamStore

T = TypeVar("T")
PREFIX = "mcp__"
SERVER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
SERVER_NAME_RULE = "1 to 32 characters of a-z, 0-9 and -, starting with a letter (no _: it separates mcp__<server>__)"
MAX_DESCRIPTION_CHARS = 16 * 1024
"""An upstream description longer than this is cut: it is data from elsewhere, bounded like every document."""


class Interrupted(Upstream):
    """An upstream server stopped while a call was running: whether the call took effect is unknown."""

    code = "interrupted"


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """`(server, tool)` of an `mcp__<server>__<tool>` name (or `mcp__<server>__*`), else None."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX) :].partition("__")
    if not sep or not tool or not SERVER_NAME.match(server):
        return None
    return server, tool


def check_server_name(name: str) -> str:
    if not SERVER_NAME.match(name):
        raise BadRequest(f"MCP server name {name!r} is not accepted: {SERVER_NAME_RULE}.")
    return name


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerSpec:
    """One mounted server: a command over stdio, or a Streamable HTTP URL. Secret values are named, never held."""

    name: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    env_secrets: Mapping[str, str] = field(default_factory=dict[str, str])
    """Environment variables whose values are sealed secrets, by secret name."""
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    bearer_secret: str | None = None
    timeout_s: float = 60.0
    source: Literal["config", "stored"] = "stored"

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"

    def to_json(self) -> dict[str, Any]:
        """What `mcp list|show --json` prints: secrets by name only."""
        out: dict[str, Any] = {"name": self.name, "transport": self.transport, "source": self.source}
        if self.url:
            out |= {"url": self.url, "headers": dict(self.headers), "bearerSecret": self.bearer_secret}
        else:
            out |= {"command": list(self.command), "env": dict(self.env), "envSecrets": dict(self.env_secrets)}
        out["timeoutS"] = self.timeout_s
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: Literal["config", "stored"] = "stored") -> ServerSpec:
        return cls(
            name=data["name"],
            command=tuple(data.get("command") or ()),
            env=dict(data.get("env") or {}),
            env_secrets=dict(data.get("envSecrets") or {}),
            url=data.get("url"),
            headers=dict(data.get("headers") or {}),
            bearer_secret=data.get("bearerSecret"),
            timeout_s=float(data.get("timeoutS", 60.0)),
            source=source,
        )


def spec_from_settings(s: McpServerSettings) -> ServerSpec:
    """A `[[mcp.servers]]` entry as a mount, checked as `mcp add` checks one."""
    spec = ServerSpec(
        name=s.name,
        command=tuple(s.command or ()),
        env=dict(s.env),
        env_secrets=dict(s.env_secrets),
        url=s.url,
        headers=dict(s.headers),
        bearer_secret=s.bearer_secret,
        timeout_s=s.timeout_s,
        source="config",
    )
    try:
        return check_spec(spec)
    except BadRequest as exc:
        raise BadRequest(f"Invalid configuration: [[mcp.servers]] {s.name!r}: {exc.message}") from None


def check_spec(spec: ServerSpec) -> ServerSpec:
    """Exactly one of a command and a URL; an http(s) URL; a name the tool names can carry."""
    check_server_name(spec.name)
    if bool(spec.command) == bool(spec.url):
        raise BadRequest(
            f"MCP server {spec.name} needs exactly one of a command (stdio: `mcp add NAME -- CMD ARGS…`) and a URL "
            "(Streamable HTTP: `mcp add NAME --url URL`)."
        )
    if spec.url and not re.match(r"^https?://[^/\s]+", spec.url):
        raise BadRequest(f"MCP server {spec.name}'s URL {spec.url!r} is not an http:// or https:// URL.")
    if spec.timeout_s <= 0:
        raise BadRequest(f"MCP server {spec.name}'s timeout must be a positive number of seconds.")
    return spec


def configured(settings_servers: list[McpServerSettings]) -> dict[str, ServerSpec]:
    """The config's servers by name (settings do not change while a harness runs: built once, not per call)."""
    return {s.name: spec_from_settings(s) for s in settings_servers}


def mounted(configured_servers: dict[str, ServerSpec], store: UpstreamStore) -> dict[str, ServerSpec]:
    """Every mounted server by name: the config's (`configured`), then the stored ones (a stored name the config
    also has is shadowed by the config's, as a provider's is)."""
    out = dict(configured_servers)
    for spec in store.list_servers():
        out.setdefault(spec.name, spec)
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class UpstreamTool:
    """One tool as an upstream's `tools/list` describes it (plain JSON; the SDK types stay in upstream/)."""

    server: str
    tool: str
    description: str
    input: dict[str, Any]
    output: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


def mcp_document(t: UpstreamTool) -> ToolDocument:
    """The tool document of an upstream tool; its CID follows its contract, so a refresh rewrites only changes."""
    description = (t.description or f"Tool {t.tool} of MCP server {t.server}.").strip()[:MAX_DESCRIPTION_CHARS]
    return ToolDocument(
        name=tool_name(t.server, t.tool),
        kind="mcp",
        summary=summary_of(description.splitlines()[0] if description else description),
        description=description,
        input=t.input or {"type": "object"},
        output=t.output,
        binding=f"mcp://{t.server}/{t.tool}",
        annotations=t.annotations or None,
    )


@dataclass(frozen=True, slots=True)
class UpstreamResult:
    """An upstream `tools/call` result as JSON: its content blocks, structured content, isError and `_meta`."""

    content: tuple[dict[str, Any], ...]
    structured: dict[str, Any] | None = None
    is_error: bool = False
    meta: dict[str, Any] | None = None


UpstreamProgress = Callable[[float, float | None, str | None], Awaitable[None]]
"""`(progress, total, message)` as an upstream reports it."""


class Upstreams(Protocol):
    """What the domain asks of the mounted servers (implemented by `mcp_harness.upstream.pool.UpstreamPool`).

    Every failure is a `HarnessError` naming the server: `Upstream` (not running, timed out, protocol error),
    `Interrupted` (it stopped mid-call), `NotFound` (no such server)."""

    async def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], progress: UpstreamProgress | None = None
    ) -> UpstreamResult: ...

    async def list_resources(self, server: str) -> list[dict[str, Any]]: ...

    async def read_resource(self, server: str, uri: str) -> list[dict[str, Any]]: ...

    async def refresh(self, server: str) -> SyncReport:
        """List the server's tools now and rewrite the documents whose contract changed (only those)."""
        ...


def on_loop(fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """Run `fn` from a blocking verb (a worker thread) on the event loop the thread belongs to, where the warm
    connections live; from a plain thread (no loop), on a loop of its own."""
    try:
        return anyio.from_thread.run(fn, *args)
    except RuntimeError as exc:
        if "event loop" not in str(exc).lower() and "worker thread" not in str(exc).lower():
            raise
        return anyio.run(fn, *args)


class UpstreamHost(Protocol):
    """Where the mounted servers and their documents are found (the harness)."""

    @property
    def upstream_store(self) -> UpstreamStore: ...
    @property
    def upstreams(self) -> Upstreams: ...
    def mcp_servers(self) -> dict[str, ServerSpec]: ...
