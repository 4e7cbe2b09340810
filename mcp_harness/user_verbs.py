"""The user holds the same verbs (HARNESS §13): `read`, `write` and `call` on a session, stamped actor `user`.

Same code path as the agent's calls, so the log shows exactly what the user did and what came of it, failures
included. User calls never promote tools (promotion skips actor `user`), and they wait for the agent: a session
whose agent run is queued or running refuses them rather than interleaving with its turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread

from mcp_harness.errors import BadRequest, Conflict, HarnessError

if TYPE_CHECKING:
    from mcp_harness.store import SessionStore
    from mcp_harness.store.sessions import Actor
    from mcp_harness.verbs.base import VerbResult

USER_VERBS = ("read", "write", "call")
_WHY_NOT = {
    "delegate": "delegation is a conversational ask; message the agent instead",
    "plan": "the plan is the agent's own checklist; the user reads it at harness://plan",
}


class Binding(Protocol):
    """A session's verb calls, on the one logged path (the composition root's `SessionBinding`)."""

    async def invoke(
        self, verb: str, arguments: dict[str, Any], actor: Actor
    ) -> tuple[VerbResult | None, HarnessError | None]: ...


async def invoke_as_user(
    sessions: SessionStore,
    bind: Callable[[str], Binding],
    session_id: str,
    verb: str,
    arguments: dict[str, Any],
) -> tuple[VerbResult | None, HarnessError | None]:
    """Run `verb` on the session as the user. Refusals before anything runs raise; a verb's own failure is
    returned (and logged), like any call's. `bind(agent_id)` binds that agent's calls to this session."""
    if verb not in USER_VERBS:
        reason = _WHY_NOT.get(verb)
        raise BadRequest("verb must be read, write, or call" + (f": {reason}." if reason else "."))

    def check() -> str:
        session = sessions.get(session_id)
        if sessions.live_run(session_id) is not None:
            raise Conflict("The agent is working in this thread right now; wait for its turn to finish.")
        return session.agent_id

    agent_id = await anyio.to_thread.run_sync(check)
    return await bind(agent_id).invoke(verb, arguments, actor="user")
