"""What an agent can call: grants intersected with what this host offers, the `~/tools` reads, and promotion.

A builtin the agent is not granted is indistinguishable from a name that does not exist, in listings, in
`read ~/tools/<name>` and in `call`, so grants cannot be discovered by probing (HARNESS §5).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from mcp_harness.callables.documents import ToolDocument, builtin_document, contract_markdown
from mcp_harness.callables.registry import BUILTINS, BY_NAME, callable_alias
from mcp_harness.grants import callable_set, upstream_granted
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.spec import VerbSpec

if TYPE_CHECKING:
    from mcp_harness.callables.upstream import ServerSpec
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.sessions import SessionStore
    from mcp_harness.store.tools import ToolRecord, ToolStore
    from mcp_harness.store.upstream_tools import UpstreamStore


class ToolHost(Protocol):
    """What the catalog reads: the agent's tool documents, the session's touched names, and what this host offers."""

    @property
    def tools(self) -> ToolStore: ...
    @property
    def sessions(self) -> SessionStore: ...
    def sandbox_runtimes(self) -> tuple[str, ...]: ...
    def offered_callables(self) -> frozenset[str]: ...
    @property
    def upstream_store(self) -> UpstreamStore: ...
    def mcp_servers(self) -> dict[str, ServerSpec]: ...


AUTHORING_LINES = [
    "",
    "Read ~/tools/<name> for a full contract; call {tool, input} runs one.",
    "Author your own with write ~/tools/<name> and JSON content {description, input?, output?, source, runtime?}.",
]


def callable_spec(host: ToolHost, name: str) -> VerbSpec:
    """A builtin's contract as this host serves it (`execute`'s runtime enum narrowed to what is offered)."""
    return BY_NAME[name].contract(host.sandbox_runtimes())


@functools.cache
def builtin_documents(runtimes: tuple[str, ...]) -> tuple[ToolDocument, ...]:
    """The builtin documents as a host offering `runtimes` serves them; the same objects every call."""
    return tuple(builtin_document(tool.contract(runtimes)) for tool in BUILTINS)


def _documents(host: ToolHost, agent: AgentRecord) -> list[ToolRecord]:
    host.tools.ensure_builtins(agent.id, builtin_documents(host.sandbox_runtimes()))
    return host.tools.list(agent.id)


def visible_documents(host: ToolHost, agent: AgentRecord) -> list[ToolRecord]:
    """Enabled documents the agent may see: granted (and offered) builtins and its enabled lambdas, by name."""
    granted = set(callable_set(host, agent.definition))
    out: list[ToolRecord] = []
    for record in _documents(host, agent):
        if not record.enabled:
            continue
        if record.kind == "builtin" and record.name not in granted:
            continue
        out.append(record)
    return out + upstream_documents(host, agent)


def upstream_documents(host: ToolHost, agent: AgentRecord) -> list[ToolRecord]:
    """The tools of mounted MCP servers the agent is granted (`mcp__<server>__<tool>`), by name. An unmounted
    server's stored documents, and ungranted tools, read as absent (issue 20)."""
    servers = host.mcp_servers()
    if not servers:
        return []
    return [r for r in host.upstream_store.tools(servers) if upstream_granted(agent.definition, r.name)]


def list_unlisted_servers(ctx: VerbContext) -> dict[str, str]:
    """Learn the tools of granted servers never listed yet (starting them), so an explicit `~/tools` read shows
    them; returns why each one that could not be listed failed. Blocking (waits for the servers)."""
    from mcp_harness.callables.upstream import on_loop
    from mcp_harness.errors import HarnessError
    from mcp_harness.grants import server_granted

    host = ctx.services
    granted = [s for s in host.mcp_servers() if server_granted(ctx.agent.definition, s)]
    wanted = [s for s in granted if not host.upstream_store.has_tools(s)]
    failed: dict[str, str] = {}
    if not wanted:
        return failed

    async def refresh(server: str) -> None:
        try:
            await host.upstreams.refresh(server)
        except HarnessError as exc:
            failed[server] = exc.message

    async def refresh_all() -> None:
        async with anyio.create_task_group() as tg:  # at once: each may take its own start-up time
            for server in wanted:
                tg.start_soon(refresh, server)

    on_loop(refresh_all)
    return {s: failed[s] for s in wanted if s in failed}


def tools_listing(ctx: VerbContext) -> dict[str, Any]:
    """`{summary, markdown, tools, verbs}`: the verbs' summary lines, then callable documents, then how to author."""
    unavailable = list_unlisted_servers(ctx)
    records = visible_documents(ctx.services, ctx.agent)
    verbs = ctx.services.verbs
    lines = [f"- {spec.summary_line()}" for spec in verbs.values()]
    local = [r for r in records if r.kind != "mcp"]
    if local:
        lines += ["", "Callable tools:"]
        lines += [f"- {r.name} — {r.document.summary}{' (authored)' if r.kind == 'lambda' else ''}" for r in local]
    by_server: dict[str, list[ToolRecord]] = {}
    for r in records:
        if r.kind == "mcp":
            by_server.setdefault((r.document.binding or "").removeprefix("mcp://").partition("/")[0], []).append(r)
    for server, tools in by_server.items():  # each mounted server's tools under its name (issue 20)
        lines += ["", f"MCP server {server} (read mcp://{server}/ for its resources):"]
        lines += [f"- {r.name} — {r.document.summary}" for r in tools]
    for server, why in unavailable.items():
        lines += ["", f"MCP server {server}: its tools are unavailable now. {why}"]
    lines += AUTHORING_LINES
    count = len(records)
    return {
        "summary": f"{len(verbs)} verbs and {count} callable tool{'s' if count != 1 else ''}.",
        "markdown": "\n".join(lines),
        "tools": [r.name for r in records],
        "verbs": list(verbs),
    }


def read_tool(ctx: VerbContext, name: str, fmt: str) -> VerbResult:
    """A verb's or a visible document's contract; anything else reads as "no tool named …" plus the listing.

    A verb's contract is the full one: the tools/list description, then its `details` (every address form with its
    options and limits), then the schemas."""
    spec = ctx.services.verbs.get(name)
    if spec is not None:
        data: dict[str, Any] = {
            "summary": f"Contract of the {spec.name} verb.",
            "name": spec.name,
            "kind": "verb",
            "description": spec.description,
            "details": spec.details,
            "input": spec.input_schema,
            "contract": spec.contract_markdown(),
        }
        if spec.output_schema is not None:
            data["output"] = spec.output_schema
        return VerbResult.of(data, fmt=fmt) if fmt == "json" else VerbResult(data, data["contract"])
    if name.startswith("mcp__"):
        list_unlisted_servers(ctx)
    for record in visible_documents(ctx.services, ctx.agent):
        if record.name == name:
            doc = record.document
            contract = contract_markdown(doc, record.cid)
            # The document's own `summary` (its listing line) moves aside for the result's one-line summary.
            data = {**doc.to_json(), "toolSummary": doc.summary, "cid": record.cid}
            data["summary"] = f"Contract of the {doc.kind} tool {doc.name}."
            data["contract"] = contract
            return VerbResult.of(data, fmt=fmt) if fmt == "json" else VerbResult(data, contract)
    listing = tools_listing(ctx)
    data = {**listing, "summary": f"No tool named {name}. Here is what you can read and call."}
    return VerbResult.of(data, listing["markdown"], fmt=fmt)


def promoted_callables(
    host: ToolHost, agent: AgentRecord, session_id: str, *, touched: set[str] | None = None
) -> dict[str, VerbSpec]:
    """Callables this session has touched (`read ~/tools/<n>` or `call <n>` by a non-user actor) that the agent may
    call — granted builtins and its enabled authored lambdas — with the contract each is served under. The touched
    names are durable (`store/touched.py`), so promotion survives restarts (HARNESS §5), and reading them costs the
    same however long the session is. `touched`: the session's names, when the caller read them already."""
    if touched is None:
        touched = host.sessions.touched(session_id)
    if not touched:
        return {}
    aliased = {callable_alias(name) for name in touched}
    granted = callable_set(host, agent.definition)
    out = {name: callable_spec(host, name) for name in granted if name in aliased}
    if "execute" in granted:  # a lambda runs in the execute sandbox (HARNESS §4)
        for record in host.tools.list(agent.id):
            if record.kind == "lambda" and record.enabled and record.name in touched and record.name not in out:
                out[record.name] = lambda_spec(record.document)
    for record in upstream_documents(host, agent):
        if record.name in touched:
            out[record.name] = mcp_spec(record.document)
    return out


def mcp_spec(doc: ToolDocument) -> VerbSpec:
    """An upstream tool's contract as a promoted MCP tool: its own schema and hints. No output schema: a promoted
    call can answer with a touch-expand, which is not the upstream's structured output."""
    hints = doc.annotations or {}
    return VerbSpec(
        name=doc.name,
        title=str(hints.get("title") or doc.name),
        description=doc.description,
        input_schema=doc.input or {"type": "object"},
        read_only=bool(hints.get("readOnlyHint", False)),
        destructive=bool(hints.get("destructiveHint", not hints.get("readOnlyHint", False))),
        idempotent=bool(hints.get("idempotentHint", False)),
        open_world=bool(hints.get("openWorldHint", True)),
    )


def lambda_spec(doc: ToolDocument) -> VerbSpec:
    """An authored lambda's contract as a promoted MCP tool: it runs code over the agent's memory."""
    return VerbSpec(
        name=doc.name,
        title=doc.name,
        description=doc.description,
        input_schema=doc.input or {"type": "object"},
        destructive=True,
        open_world=True,
    )
