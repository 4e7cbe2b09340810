"""Who may see or touch what: the one rule for agents, sessions, runs and the things inside them (DESIGN §3).

A caller is the account owner (stdio, the CLI, loopback HTTP without tokens, a token with no agent) or confined to
one agent (an HTTP token scoped to it, and every run such a caller starts, down the whole tree). A confined caller
sees and touches only its agent's sessions, runs, children, memory, tools and identities, and may act only as its
agent. Everything that names an agent, a session or a run asks this module, and a refusal about someone else's
thing is the same `NotFound` as a thing that does not exist, so a token learns nothing about other agents.

Grants (what an agent may *do*) are a different question, answered by `grants.may()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mcp_harness.errors import NotFound

if TYPE_CHECKING:
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.sessions import SessionRecord

RUN_SCOPE_KEY = "scopeAgentId"
"""Where a run's input records the agent its starter was confined to; every child inherits it."""


class Owned(Protocol):
    """A session or a run: something owned by an account and (for runs, usually) an agent."""

    @property
    def account_id(self) -> str: ...
    @property
    def agent_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Owner:
    """Who owns a row read without its record (a joined listing): enough for `Scope.sees`."""

    account_id: str
    agent_id: str | None


@dataclass(frozen=True, slots=True)
class Scope:
    """Whom a caller acts for: an account, and the one agent it is confined to (None: the owner, all agents)."""

    account_id: str
    agent_id: str | None = None

    @property
    def confined(self) -> bool:
        return self.agent_id is not None

    def sees(self, thing: Owned | None) -> bool:
        """Whether the caller may see (and so name) this session or run."""
        if thing is None or thing.account_id != self.account_id:
            return False
        return self.agent_id is None or thing.agent_id == self.agent_id

    def may_act_as(self, agent: AgentRecord | None) -> bool:
        """Whether the caller may run work as `agent` (delegate's `agentId`, a bound session's agent)."""
        if agent is None or agent.account_id != self.account_id:
            return False
        return self.agent_id is None or agent.id == self.agent_id

    def session(self, session: SessionRecord | None, session_id: str) -> SessionRecord:
        """The session if the caller sees it; the same 404 whether it is missing or someone else's."""
        if session is None or not self.sees(session):
            raise NotFound(f"No thread {session_id}. read thread: lists the threads you can see.")
        return session

    def run(self, run: RunRecord | None, run_id: str) -> RunRecord:
        """The run if the caller sees it; the same 404 whether it is missing or someone else's."""
        if run is None or not self.sees(run):
            raise NotFound(f"No run {run_id}.")
        return run

    def agent_filter(self, requested: str | None) -> str | None:
        """The agent id a listing is limited to: the confined agent, else what the caller asked for."""
        return self.agent_id if self.agent_id is not None else requested

    def for_run(self) -> dict[str, str]:
        """What a run started by this caller records, so the whole tree stays confined like its starter."""
        return {RUN_SCOPE_KEY: self.agent_id} if self.agent_id is not None else {}

    @classmethod
    def of_run(cls, run: RunRecord) -> Scope:
        """The scope a run acts in: its starter's, recorded on the run."""
        recorded = run.input.get(RUN_SCOPE_KEY)
        return cls(run.account_id, recorded if isinstance(recorded, str) else None)


__all__ = ["RUN_SCOPE_KEY", "Owned", "Owner", "Scope"]
