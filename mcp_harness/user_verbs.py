"""The user holds the same verbs (HARNESS §13): `read`, `write` and `call` on a session, stamped actor `user`.

Same code path as the agent's calls, so the log shows exactly what the user did and what came of it, failures
included. User calls never promote tools (promotion skips actor `user`), and they wait for the agent: a session
whose agent run is queued or running refuses them rather than interleaving with its turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio.to_thread

from mcp_harness.errors import BadRequest, Conflict, HarnessError

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.verbs.base import VerbResult

USER_VERBS = ("read", "write", "call")
_WHY_NOT = {
    "delegate": "delegation is a conversational ask; message the agent instead",
    "plan": "the plan is the agent's own checklist; the user reads it at harness://plan",
}


async def invoke_as_user(
    harness: Harness, session_id: str, verb: str, arguments: dict[str, Any]
) -> tuple[VerbResult | None, HarnessError | None]:
    """Run `verb` on the session as the user. Refusals before anything runs raise; a verb's own failure is
    returned (and logged), like any call's."""
    from mcp_harness.harness import SessionBinding

    if verb not in USER_VERBS:
        reason = _WHY_NOT.get(verb)
        raise BadRequest("verb must be read, write, or call" + (f": {reason}." if reason else "."))

    def check() -> str:
        session = harness.sessions.get(session_id)
        if harness.sessions.live_run(session_id) is not None:
            raise Conflict("The agent is working in this thread right now; wait for its turn to finish.")
        return session.agent_id

    agent_id = await anyio.to_thread.run_sync(check)
    binding = SessionBinding(harness, agent_id=agent_id, session_id=session_id)
    return await binding.invoke(verb, arguments, actor="user")
