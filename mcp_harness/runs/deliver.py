"""`return_result` from outside: an MCP client connected to a child session's endpoint delivers the typed result
the parent asked for, with the same validation, the same three tries and the same delivery as a server-run child
(HARNESS §6, DESIGN §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_harness.errors import BadRequest, Conflict, HarnessError
from mcp_harness.runs.outcomes import Failed, Succeeded
from mcp_harness.store._util import new_id
from mcp_harness.verbs.base import VerbResult
from mcp_harness.verbs.schema_subset import value_errors

if TYPE_CHECKING:
    from mcp_harness.runs.resolve import RunHost
    from mcp_harness.store.sessions import Actor

MAX_TRIES = 3


def _failures(host: RunHost, session_id: str) -> int:
    return sum(
        1
        for e in host.sessions.events(session_id)
        if e.type == "tool_result" and e.payload.get("name") == "return_result" and "error" in e.payload
    )


async def deliver_typed_result(
    host: RunHost, session_id: str, schema: dict[str, Any], payload: dict[str, Any]
) -> tuple[VerbResult | None, HarnessError | None]:
    session = await host.engine.offload(host.sessions.get, session_id)
    if session.run_id is None:
        return None, BadRequest("This session owes no result.")
    run = await host.engine.offload(host.runs.get, session.run_id)
    if run.status in ("succeeded", "failed", "canceled"):
        return None, Conflict(f"This task already ended ({run.status}); nothing more can be delivered.")
    errors = value_errors(schema, payload)
    call_id = new_id()
    call: dict[str, Any] = {"type": "tool_call", "id": call_id, "name": "return_result", "input": payload}
    agent: Actor = "agent"
    if errors:
        tries = await host.engine.offload(_failures, host, session_id) + 1
        if tries >= MAX_TRIES:
            message = f"Result rejected (attempt limit reached): {'; '.join(errors)}."
        else:
            message = (
                f"Result does not match the required schema: {'; '.join(errors)}. Fix and call return_result again."
            )
        outcome = {"type": "tool_result", "toolCallId": call_id, "name": "return_result", "error": message}
        await host.engine.offload(host.sessions.append_many, session_id, [(call, agent), (outcome, agent)])
        if tries >= MAX_TRIES:
            await host.engine.complete(
                run.id, Failed(code="output-schema", message="Sub-session could not produce a schema-valid result")
            )
        return None, BadRequest(message)
    outcome = {"type": "tool_result", "toolCallId": call_id, "name": "return_result", "output": {"accepted": True}}
    await host.engine.offload(host.sessions.append_many, session_id, [(call, agent), (outcome, agent)])
    await host.engine.complete(run.id, Succeeded(payload))
    return VerbResult.of(
        {"summary": "Result accepted; the task that delegated this one has it now.", "accepted": True}
    ), None
