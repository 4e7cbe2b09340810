"""A verb call's two transcript events: the `tool_call` logged before it runs and the `tool_result` after."""

from __future__ import annotations

from typing import Any

from mcp_harness.errors import HarnessError
from mcp_harness.jsondepth import MAX_INPUT_DEPTH, depth_exceeds
from mcp_harness.store._util import new_id
from mcp_harness.store.sessions import Actor
from mcp_harness.verbs.base import VerbResult


def call_event(verb: str, call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A verb call as its transcript logs it."""
    if depth_exceeds(arguments, MAX_INPUT_DEPTH):
        # Refused by its contract anyway; logged as a marker, since a value this deep would not decode again.
        arguments = {"omitted": f"the input nests deeper than {MAX_INPUT_DEPTH} levels"}
    return {"type": "tool_call", "id": call_id, "name": verb, "input": arguments}


def outcome_event(verb: str, call_id: str, result: VerbResult | None, error: HarnessError | None) -> dict[str, Any]:
    outcome: dict[str, Any] = {"type": "tool_result", "toolCallId": call_id, "name": verb}
    if error is not None:
        outcome["error"] = error.message
    else:
        assert result is not None
        outcome["output"] = result.data if result.logged is None else result.logged
    return outcome


def new_call_id(actor: Actor) -> str:
    """Tool call ids; the user's are prefixed, as the reference's are, so a transcript shows who acted at a glance."""
    return f"user-{new_id()}" if actor == "user" else new_id()
