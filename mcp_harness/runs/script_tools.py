"""What `ctx.call` can reach (HARNESS §9.2): read, write, the agent's enabled callables and its enabled lambdas."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio.to_thread

from mcp_harness.callables import catalog
from mcp_harness.callables.registry import CALLABLES, callable_alias
from mcp_harness.errors import HarnessError
from mcp_harness.scope import Scope
from mcp_harness.verbs import call as call_verb
from mcp_harness.verbs.base import VerbContext
from mcp_harness.verbs.contracts import input_errors
from mcp_harness.verbs.schema_subset import value_errors

if TYPE_CHECKING:
    from mcp_harness.runs.script_journal import Execution
    from mcp_harness.services import Services


def _failed(code: str, message: str) -> dict[str, Any]:
    return {"status": "error", "error": {"code": code, "message": message}}


async def run_tool(services: Services, ex: Execution, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """Run one tool for the script: `{status: ok, output}` or `{status: error, error: {code, message}}`."""
    scope = Scope.of_run(ex.run)
    ctx = VerbContext(services=services, agent=ex.agent, session_id=None, actor="agent", scope=scope, run_id=ex.run.id)
    try:
        if name in ("read", "write"):
            problems = input_errors(name, tool_input)
            if problems:
                return _failed("invalid-input", f"Invalid input for {name}: {'; '.join(problems)}.")
            result, error = await anyio.to_thread.run_sync(services.invoke_sync, ctx, name, tool_input)
            if error is not None:
                return _failed("tool-error", error.message)
            assert result is not None
            return {"status": "ok", "output": result.data}
        callables = await anyio.to_thread.run_sync(catalog.callable_set, services, ex.agent.definition)
        alias = callable_alias(name)
        if alias in CALLABLES and alias in callables:
            spec = catalog.callable_spec(services, alias)
            problems = value_errors(spec.input_schema, tool_input)
            if problems:
                return _failed("invalid-input", f"Invalid input for {alias}: {'; '.join(problems)}.")
            return {"status": "ok", "output": (await call_verb.dispatch(ctx, alias, tool_input)).data}
        record = await anyio.to_thread.run_sync(services.tools.get, ex.agent.id, name)
        if record is not None and record.kind == "lambda" and record.enabled:
            out = await call_verb.run_lambda(ctx, record.document, record.cid, tool_input, callables)
            return {"status": "ok", "output": out.data}
        lambdas = await anyio.to_thread.run_sync(services.tools.list, ex.agent.id)
        allowed = ["read", "write", *callables, *(r.name for r in lambdas if r.kind == "lambda" and r.enabled)]
        return _failed("unknown-tool", f"No tool {name} for scripts. A script can call: {', '.join(allowed)}.")
    except HarnessError as exc:
        return _failed("tool-error", exc.message)


__all__ = ["run_tool"]
