"""The `call` verb (HARNESS §5): resolve a name (`callables/registry.py`), touch-expand on a miss, then run it.

A miss never punishes the caller: an unknown or ungranted name returns the listing, and input the contract rejects
returns the contract with the validation errors, both as ordinary results. Only a tool that ran and failed (or a
gate that refuses it) is an error.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from mcp_harness.callables import catalog, registry
from mcp_harness.callables.documents import ToolDocument, contract_markdown
from mcp_harness.callables.registry import CallableTool, callable_alias
from mcp_harness.errors import BadRequest, Forbidden
from mcp_harness.verbs.base import VerbContext, VerbResult, touch_expand
from mcp_harness.verbs.schema_subset import value_errors


async def call(ctx: VerbContext, arguments: dict[str, Any]) -> VerbResult:
    raw = arguments.get("tool")
    name = callable_alias(raw.strip()) if isinstance(raw, str) else ""
    given = arguments.get("input")
    tool_input: dict[str, Any] = given if isinstance(given, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    services = ctx.services
    if name.startswith("mcp__"):  # a mounted MCP server's tool (issue 20); one it cannot find gets the listing
        from mcp_harness.callables.upstream_call import call_upstream

        answered = await call_upstream(ctx, name, tool_input)
        if answered is not None:
            return answered
    callables = await anyio.to_thread.run_sync(catalog.callable_set, services, ctx.agent.definition)
    target = await anyio.to_thread.run_sync(registry.resolve, services, ctx.agent.id, name, callables)
    if isinstance(target, CallableTool):
        spec = target.contract(services.sandbox_runtimes())
        errors = value_errors(spec.input_schema, tool_input)
        if errors:
            return touch_expand(name, spec.contract_markdown(), errors)
        return await dispatch(ctx, name, tool_input)
    if target is not None:
        return await run_lambda(ctx, target.document, target.cid, tool_input, callables)
    listing = await anyio.to_thread.run_sync(catalog.tools_listing, ctx)
    summary = (
        f"No callable tool named {name}. Here is what you can call."
        if name
        else "call requires a tool name. Here is what you can call."
    )
    return VerbResult.of({**listing, "summary": summary}, listing["markdown"])


def prepare(ctx: VerbContext, arguments: dict[str, Any]) -> Any:
    """The blocking look-up a call of a mounted server's tool starts with, done in the hop that logs the call
    (`harness.ASYNC_PREPARE`): one trip off the event loop fewer on the path every upstream call takes."""
    raw = arguments.get("tool")
    name = callable_alias(raw.strip()) if isinstance(raw, str) else ""
    if not name.startswith("mcp__"):
        return None
    from mcp_harness.callables.upstream_call import prepare as prepare_upstream

    return prepare_upstream(ctx, name)


async def dispatch(ctx: VerbContext, name: str, tool_input: dict[str, Any]) -> VerbResult:
    """Run builtin `name` on input its contract accepted (the caller checked grant, offer and input)."""
    tool = registry.builtin(name)
    if tool is None or tool.handler is None:
        raise BadRequest(f"Tool {name} has no executor in this runtime.")
    return await tool.handler(ctx, tool_input)


async def run_lambda(
    ctx: VerbContext, doc: ToolDocument, cid: str, tool_input: dict[str, Any], callables: list[str]
) -> VerbResult:
    """Gates in order — input contract, source, host runtime, the `execute` grant — then the sandbox."""
    errors = value_errors(doc.input, tool_input)
    if errors:
        return touch_expand(doc.name, contract_markdown(doc, cid), errors)
    if not (doc.source or "").strip():
        raise BadRequest(f"Tool {doc.name} has no source to run; rewrite it with write ~/tools/{doc.name}.")
    runtime = "python" if doc.runtime == "python" else "ts"
    offered = ctx.services.sandbox_runtimes()
    if runtime not in offered:
        have = ", ".join(offered) or "none (no sandbox on this host; see `mcp-harness doctor`)"
        raise BadRequest(
            f"Tool {doc.name} is written in {doc.runtime}, which this server cannot run: runtimes offered are "
            f"{have}. Rewrite it in an offered runtime."
        )
    if "execute" not in callables:
        raise Forbidden(
            f"Tool {doc.name} runs code in the sandbox, which is not enabled for this agent: its owner has not "
            "granted execute."
        )
    from mcp_harness.callables.lambdas import run

    return await run(ctx, doc, runtime, tool_input)
