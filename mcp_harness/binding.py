"""A connection's verb calls: which agent and session they belong to, the session created on first need.

Every front (the MCP server per client connection or session path, the CLI, a trigger firing) calls verbs through a
`SessionBinding`, which resolves the caller's scope once and hands each call to the harness's one `invoke` path.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from mcp_harness.errors import HarnessError
from mcp_harness.harness import ASYNC_PREPARE, ASYNC_VERBS, Harness
from mcp_harness.scope import Scope
from mcp_harness.store import SessionRecord
from mcp_harness.store.sessions import Actor, SessionKind
from mcp_harness.verbs.base import Progress, VerbContext, VerbResult
from mcp_harness.verbs.call_events import new_call_id

logger = logging.getLogger(__name__)


@dataclass
class SessionBinding:
    """Which agent and session a connection's verb calls belong to; the session is created on first need."""

    harness: Harness
    agent_id: str
    session_id: str | None = None
    kind: SessionKind = "conversation"
    title: str | None = None
    confined_to: str | None = None
    """For a request with an agent-scoped token: that agent (name or id). Its calls see only that agent's things."""
    promoted: dict[str, Any] | None = None
    """The promoted callables last shown to this binding's client, to notice when the list grows."""
    _verified: bool = False
    _scope: Scope | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def scope(self) -> Scope:
        """Whom this binding's calls act for (`scope.py`). Blocking on first use (resolves the token's agent)."""
        if self._scope is None:
            h = self.harness
            confined = h.agent(self.confined_to).id if self.confined_to is not None else None
            self._scope = Scope(h.account_id, confined)
        return self._scope

    @property
    def verified(self) -> bool:
        """Whether the bound session has been created or checked."""
        return self._verified

    def ensure_sync(self) -> SessionRecord:
        """The bound session, created (or, for an explicit id, checked) once. Blocking."""
        h = self.harness
        with self._lock:
            if self.session_id is not None:
                record = self.scope().session(h.sessions.find(self.session_id), self.session_id)
            elif self.kind == "standing":
                record = h.sessions.standing(h.account_id, self.agent_id)
            else:
                record = h.sessions.create(h.account_id, self.agent_id, kind=self.kind, title=self.title)
            self.session_id = record.id
            self.agent_id = record.agent_id
            self._verified = True
            return record

    def context_sync(
        self,
        actor: Actor = "agent",
        *,
        create: bool = True,
        call_id: str | None = None,
        progress: Progress | None = None,
    ) -> VerbContext:
        """The verb context for a call on this binding. Blocking; one session lookup at most per binding."""
        if (create or self.session_id is not None) and not self._verified:
            self.ensure_sync()
        agent = self.harness.agents.get(self.agent_id)
        return VerbContext(
            services=self.harness,
            agent=agent,
            session_id=self.session_id,
            actor=actor,
            scope=self.scope(),
            progress=progress,
            call_id=call_id,
        )

    def _invoke_sync(
        self, verb: str, arguments: dict[str, Any], actor: Actor
    ) -> tuple[VerbResult | None, HarnessError | None]:
        try:
            ctx = self.context_sync(actor)
        except HarnessError as exc:
            return None, exc
        return self.harness.invoke_sync(ctx, verb, arguments)

    async def invoke(
        self, verb: str, arguments: dict[str, Any], actor: Actor = "agent", progress: Progress | None = None
    ) -> tuple[VerbResult | None, HarnessError | None]:
        """Run a verb on this binding's session: one hop off the event loop for a quick verb."""
        if verb not in ASYNC_VERBS:
            return await anyio.to_thread.run_sync(self._invoke_sync, verb, arguments, actor)

        def begin() -> tuple[VerbContext, str]:
            # One hop, not two, for the context and the call's `tool_call` (committed before the verb starts, as
            # `invoke_async` would have): on the `call` path each hop costs about what the commit does. The context
            # is built whole, call id and all: on that path each `dataclasses.replace` cost about what a statement
            # does.
            call_id = new_call_id(actor)
            ctx = self.context_sync(actor, call_id=call_id, progress=progress)
            self.harness.log_call_sync(ctx, verb, arguments, call_id)
            prepare = ASYNC_PREPARE.get(verb)
            if prepare is None:
                return ctx, call_id
            try:
                prepared = prepare(ctx, arguments)
            except Exception:  # the call is logged: the verb meets the failure again itself, and answers it
                logger.debug("preparing %s failed; the verb looks it up itself", verb, exc_info=True)
                prepared = None
            return (ctx if prepared is None else dataclasses.replace(ctx, prepared=prepared)), call_id

        try:
            if self._verified:
                # The session exists: `begin` only reads and appends, in one transaction that `quick` runs on the
                # event loop when the database is free (the hop cost more than the work).
                ctx, call_id = await self.harness.db.quick(begin)
            else:
                ctx, call_id = await anyio.to_thread.run_sync(begin)  # may create the session (and bind it here)
        except HarnessError as exc:
            return None, exc
        return await self.harness.invoke_async(ctx, verb, arguments, call_id, logged=True)

    async def owed_output_schema(self) -> dict[str, Any] | None:
        """The result schema this session owes its parent (a delegated child), else None."""
        if self.session_id is None:
            return None
        return await anyio.to_thread.run_sync(self.harness.sessions.owed_output_schema, self.session_id)

    async def context(self, actor: Actor = "agent", *, create: bool = True) -> VerbContext:
        return await anyio.to_thread.run_sync(lambda: self.context_sync(actor, create=create))
