"""Spawning model children (HARNESS §6): the checks and the writes, for one child or a reply's worth at once.

Split from `delegate.py` (the verb, detached and script children, the result shape) so each stays readable; the
names here are re-exported there. A reply that delegates ten times writes its ten children together (`ChildBatch`):
sessions, briefs and runs in one statement per table and one transaction, rather than ten of each.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.scope import Scope
from mcp_harness.services import Stores
from mcp_harness.verbs.plan import running_step

if TYPE_CHECKING:
    from mcp_harness.store.runs import NewRun, RunRecord
    from mcp_harness.store.sessions import Actor, NewSession

MAX_DEPTH = 3
MAX_CHILDREN_PER_RUN = 10
MAX_SESSION_CHILDREN = 10
MAX_BRIEF_BYTES = 64 * 1024
CHILD_MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Spawned:
    run_id: str
    session_id: str | None
    title: str


def brief_text(value: object) -> str:
    """The child's first message: a string brief verbatim, anything else as a fenced JSON block."""
    if isinstance(value, str):
        return value
    return "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```"


def title_of(spec: dict[str, Any], default: str = "Sub-session") -> str:
    if spec.get("title"):
        return str(spec["title"])[:256]
    brief = spec.get("input")
    if isinstance(brief, str):
        line = " ".join(brief.strip().splitlines()[0].split()) if brief.strip() else ""
        if line:
            return line if len(line) <= 80 else line[:79] + "…"
    return default


def spawn_depth(stores: Stores, run: RunRecord, *, client_roots: Collection[str] | None = None) -> int:
    """How deep `run` sits below whoever started its tree. A tree an MCP client started with `delegate` has the
    client's turn as its (run-less) level 0, so its stored depths are one short; this adds the missing level.
    `client_roots`: the client-started roots among a batch's, read already (`StartReads`)."""
    if run.id == run.root_run_id:
        client_started = run.parent_run_id is None and run.parent_tool_call_id is not None
    elif client_roots is not None:
        client_started = run.root_run_id in client_roots
    else:
        client_started = stores.runs.started_by_client(run.root_run_id)
    return run.depth + (1 if client_started else 0)


def spawn_child(
    stores: Stores,
    *,
    agent_id: str,
    parent_session_id: str,
    parent_run: RunRecord | None,
    tool_call_id: str | None,
    spec: dict[str, Any],
    script_step: dict[str, Any] | None = None,
    scope: Scope | None = None,
    parent_depth: int | None = None,
) -> Spawned:
    """Create the child session (brief as its first message) and enqueue its run. Blocking; one transaction.

    A script's model child has no `tool_call_id`: it answers no transcript call, and its parent script re-attaches
    to it by run id from its journal. Its plan step is the script's open `ctx.step` (`script_step`: `{id, label}`,
    empty for none), not the conversation's. `scope` is the caller's (`scope.py`); a run's children inherit the
    scope recorded on their parent run. `parent_depth` is `spawn_depth(parent_run)` when the caller has it."""
    batch = ChildBatch(
        stores,
        agent_id=agent_id,
        parent_session_id=parent_session_id,
        parent_run=parent_run,
        script_step=script_step,
        scope=scope,
        parent_depth=parent_depth,
    )
    spawned = batch.add(tool_call_id, spec)
    batch.write()
    return spawned


@dataclass(frozen=True, slots=True)
class _Planned:
    spawned: Spawned
    session_id: str
    agent_id: str
    brief: str
    tool_call_id: str | None
    run_input: dict[str, Any]


class ChildBatch:
    """Model children of one parent: each checked as it is added (`add`: refused alone, nothing written), then all
    written together (`write`: one statement per table, in one transaction), so a reply that delegates ten times
    pays for one spawn's bookkeeping, not ten. What the checks read (the parent's child count, its plan step, its
    depth) is read once for the batch; a check counts the children added before it."""

    def __init__(
        self,
        stores: Stores,
        *,
        agent_id: str,
        parent_session_id: str,
        parent_run: RunRecord | None,
        script_step: dict[str, Any] | None = None,
        scope: Scope | None = None,
        parent_depth: int | None = None,
    ) -> None:
        self.stores = stores
        self.agent_id = agent_id
        self.parent_session_id = parent_session_id
        self.parent_run = parent_run
        self.scope = scope_of(stores, parent_run, scope)
        if parent_depth is None and parent_run is not None:
            parent_depth = spawn_depth(stores, parent_run)
        self.depth = (parent_depth or 0) + 1
        self._script_step = script_step
        self._step: dict[str, Any] | None = None
        self._existing: int | None = None
        self._planned: list[_Planned] = []

    def add(self, tool_call_id: str | None, spec: dict[str, Any]) -> Spawned:
        """Check one child and plan it. Raises (BadRequest, NotFound) when it is refused; nothing is written."""
        from mcp_harness.store._util import new_id

        stores = self.stores
        if self.depth > MAX_DEPTH:
            raise BadRequest(f"Sub-session depth limit reached ({MAX_DEPTH}); finish the work here.")
        if self._existing is None:
            parent_run = self.parent_run
            if parent_run is not None:
                self._existing = stores.runs.count_children(parent_run.id)
            else:
                self._existing = stores.sessions.live_children(self.parent_session_id)
        if self.parent_run is not None:
            if self._existing + len(self._planned) >= MAX_CHILDREN_PER_RUN:
                raise BadRequest(
                    f"This run already spawned {MAX_CHILDREN_PER_RUN} sub-sessions; finish the work here or wait."
                )
        elif self._existing + len(self._planned) >= MAX_SESSION_CHILDREN:
            raise BadRequest(
                f"This session already has {MAX_SESSION_CHILDREN} children running; wait for one to finish first."
            )
        child_agent = self.agent_id
        if "agentId" in spec:
            found = stores.agents.find(stores.account_id, spec["agentId"])
            if not self.scope.may_act_as(found):
                raise NotFound(f"No agent {spec['agentId']} on this account; read thread: or ask the user for its id.")
            assert found is not None
            child_agent = found.id
        title = title_of(spec)
        run_input: dict[str, Any] = {"spec": spec, "parentToolCallId": tool_call_id, **self.scope.for_run()}
        step = self._plan_step()
        if step:
            if step.get("id"):
                run_input["planStepId"] = step["id"]
            run_input["planStepLabel"] = step["label"]
        session_id = new_id()
        spawned = Spawned(run_id=new_id(), session_id=session_id, title=title)
        self._planned.append(
            _Planned(spawned, session_id, child_agent, brief_text(spec["input"]), tool_call_id, run_input)
        )
        return spawned

    def _plan_step(self) -> dict[str, Any] | None:
        if self._script_step is not None:
            return self._script_step
        if self._step is None:
            self._step = running_step(self.stores.sessions.get_plan(self.parent_session_id)) or {}
        return self._step

    def write(
        self,
        session_id: str | None = None,
        logged: Sequence[tuple[dict[str, Any], Actor]] = (),
        into: SpawnWrites | None = None,
    ) -> None:
        """Write the children added since the last write (sessions, briefs and runs) and `logged`, events of
        `session_id` (the parent's: the calls that spawned them), in the same batch. Blocking; one transaction.
        `into`: gathered there instead, to be written with other parents' (`SpawnWrites.flush`)."""
        from mcp_harness.store.runs import NewRun
        from mcp_harness.store.sessions import NewSession

        planned, self._planned = self._planned, []
        if self._existing is not None:
            self._existing += len(planned)
        if not planned and not logged:
            return
        stores = self.stores
        parent_run_id = self.parent_run.id if self.parent_run is not None else None
        writes = into if into is not None else SpawnWrites(stores)
        if session_id is not None and logged:
            writes.logged.append((session_id, logged))
        writes.sessions += [
            NewSession(
                id=p.session_id,
                agent_id=p.agent_id,
                kind="child",
                title=p.spawned.title,
                parent_session_id=self.parent_session_id,
                run_id=p.spawned.run_id,
                events=[({"type": "message", "role": "user", "content": p.brief}, "agent")],
            )
            for p in planned
        ]
        writes.runs += [
            NewRun(
                id=p.spawned.run_id,
                account_id=stores.account_id,
                kind="agent",
                title=p.spawned.title,
                origin="agent",
                agent_id=p.agent_id,
                session_id=p.session_id,
                input=p.run_input,
                parent_run_id=parent_run_id,
                parent_tool_call_id=p.tool_call_id,
                queue="background",
                max_attempts=CHILD_MAX_ATTEMPTS,
            )
            for p in planned
        ]
        if into is None:
            writes.flush()


@dataclass(slots=True)
class SpawnWrites:
    """What `ChildBatch.write` writes, gathered from one parent or several (sibling runs' replies delegating in one
    batch, `AgentExecutor._delegate_groups`) and written by `flush` in one statement per table: the parents' logged
    calls, the children's sessions with their briefs, their runs."""

    stores: Stores
    logged: list[tuple[str, Sequence[tuple[dict[str, Any], Actor]]]] = field(default_factory=list)
    sessions: list[NewSession] = field(default_factory=list)
    runs: list[NewRun] = field(default_factory=list)

    def flush(self) -> None:
        """Write what was gathered, in one transaction, and start again empty. Blocking."""
        stores = self.stores
        logged, sessions, runs = self.logged, self.sessions, self.runs
        self.logged, self.sessions, self.runs = [], [], []
        if not (logged or sessions or runs):
            return
        with stores.db.transaction() as conn:
            if logged:
                stores.sessions.append_across_within(conn, logged)
            stores.sessions.create_many(stores.account_id, sessions)
            stores.runs.enqueue_many(runs)


def scope_of(stores: Stores, parent_run: RunRecord | None, given: Scope | None) -> Scope:
    """The spawning caller's scope: given by an MCP caller, else the one recorded on the parent run."""
    if given is not None:
        return given
    if parent_run is not None:
        return Scope.of_run(parent_run)
    return Scope(stores.account_id)
