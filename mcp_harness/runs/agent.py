"""The agent loop for server-run turns (HARNESS §6–§8): replay, ask the model, run its tool calls, park on
children, keep obligations.

Everything a turn needs is rebuilt from durable state each time the run executes, so a run that parked on its
children, or was requeued by the boot sweep after a crash, simply executes again: interrupted tool calls get a
synthesized result, children that finished while nobody listened are delivered, and the loop carries on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from mcp_harness.callables.catalog import promoted_callables
from mcp_harness.callables.registry import CALLABLES, callable_alias
from mcp_harness.definition import AgentDefinition
from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.grants import narrowed
from mcp_harness.models.wire import Message, ModelRequest, ModelResponse, ProviderError, ToolCall, ToolSpec
from mcp_harness.runs import Canceled, Failed, Outcome, Parked, Succeeded, settle_batch
from mcp_harness.runs.images import with_images
from mcp_harness.runs.outcomes import INTERRUPTED
from mcp_harness.runs.prompt import (
    MAX_CONTINUATIONS,
    StartIndex,
    continuation_prompt,
    plan_state,
    system_prompt,
    unmet_notice,
)
from mcp_harness.runs.replay import replay
from mcp_harness.runs.resolve import (
    deliver_within,
    has_plan_step,
    pending_spawns,
    reconcile_session,
    settle_plan_step,
)
from mcp_harness.runs.start_reads import SessionReads, StartReads
from mcp_harness.scope import Scope
from mcp_harness.store.run_leases import require_leases
from mcp_harness.store.run_settle import Settlement
from mcp_harness.verbs import delegate as delegate_verb
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.contracts import RETURN_RESULT_DESCRIPTION, VERBS
from mcp_harness.verbs.plan import TERMINAL
from mcp_harness.verbs.schema_subset import value_errors

if TYPE_CHECKING:
    from mcp_harness.services import Services, Stores
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.runs import RunRecord
    from mcp_harness.store.sessions import Actor

logger = logging.getLogger(__name__)

MAX_RETURN_RESULT_TRIES = 3
_VERB_TOOLS = tuple(
    ToolSpec(name=v.name, description=v.description, input_schema=v.input_schema) for v in VERBS.values()
)
"""The five verbs as the model sees them: fixed for the process, so built once rather than for every request."""


@dataclasses.dataclass
class Turn:
    """Mutable state of one executor invocation."""

    run: RunRecord
    agent: AgentRecord
    spec: dict[str, Any]
    delivered: bool = False
    payload: Any = None
    result_failures: int = 0
    last_result_errors: list[str] = dataclasses.field(default_factory=list)
    """Why the last `return_result` was rejected: a failed typed child reports it."""
    last_text: str = ""
    owed: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Obligations still open when a reply called no tools (computed with the reply's write: one trip)."""
    depth: int | None = None
    """The run's spawn depth (`delegate.spawn_depth`), read once: it never changes while the run lives."""
    calls_open: bool = True
    """False from set-up until the first request when the session had no call open (a new child's): that request
    has no pending spawns to look up."""

    def spawn_depth(self, stores: Stores) -> int:
        if self.depth is None:
            self.depth = delegate_verb.spawn_depth(stores, self.run)
        return self.depth


def effective_agent(agent: AgentRecord, spec: dict[str, Any]) -> AgentRecord:
    """The agent as this run may act: `spec.prompt` replaces the prompt; `spec.tools` only narrows grants."""
    definition: AgentDefinition = agent.definition
    changes: dict[str, Any] = {}
    if spec.get("prompt"):
        changes["system_prompt"] = spec["prompt"]
    if isinstance(spec.get("tools"), list):
        base = definition.tools if definition.tools is not None else list(CALLABLES)
        wanted = {callable_alias(t) for t in spec["tools"]}
        kept = [t for t in base if callable_alias(t) in wanted]
        changes["tools"] = tuple(dict.fromkeys([*kept, *narrowed(definition.tools, spec["tools"])]))
    if not changes:
        return agent
    return dataclasses.replace(agent, definition=dataclasses.replace(definition, **changes))


def spec_of(stores: Stores, run: RunRecord) -> dict[str, Any]:
    """The child spec: the run's own, else inherited from the run that created its session (HARNESS §6)."""
    spec = run.input.get("spec")
    if isinstance(spec, dict):
        return spec  # pyright: ignore[reportUnknownVariableType]
    if run.session_id:
        session = stores.sessions.get(run.session_id)
        if session.run_id and session.run_id != run.id:
            origin = stores.runs.find(session.run_id)
            if origin is not None and isinstance(origin.input.get("spec"), dict):
                return origin.input["spec"]
    return {}


class AgentExecutor:
    """Executes `kind: agent` runs. Callable as the engine's executor.

    It takes every service, not a part: the model's tool calls run as verbs, and a verb's context carries them all.
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        self._start_index = StartIndex()

    async def __call__(self, run: RunRecord) -> Outcome:
        if run.session_id is None or run.agent_id is None:
            return Failed(code="config-error", message="An agent run needs a session and an agent.")
        try:
            # First in line: this sends the run's model request, so in a fan-out the children claimed already start
            # waiting on their models while their siblings are still being spawned. Siblings claimed together
            # start in one batch.
            started = await self.services.engine.offload_batch(self._starts, run, first=True)
        except HarnessError as exc:
            return Failed(code="config-error", message=exc.message)
        if isinstance(started, HarnessError):
            return Failed(code="config-error", message=started.message)
        if started is None:
            return Canceled()  # canceled between its claim and its start: nothing of it runs
        turn, client, first = started
        continuations = 0
        while True:
            outcome = await self._model_turns(turn, client, first)
            first = None
            if outcome is not None:
                return outcome
            owed = turn.owed
            if not owed:
                return self._success(turn)
            if continuations < MAX_CONTINUATIONS:
                continuations += 1
                await self._system_message(turn, continuation_prompt(owed))
                continue
            await self._system_message(turn, unmet_notice(owed))
            if any(o["kind"] == "typed-result" for o in owed):
                return Failed(
                    code="output-schema",
                    message="Sub-session ended without delivering a valid return_result",
                    detail={"unmetObligations": owed},
                )
            return Succeeded({"text": turn.last_text, "unmetObligations": owed})

    # -- set-up -----------------------------------------------------------------------------------------------

    def _starts(self, runs: list[RunRecord]) -> list[tuple[Turn, Any, ModelRequest | Exception] | HarnessError | None]:
        """`_start` of several runs in one trip (`offload_batch`); a run whose set-up is refused gets its error, the
        others start. Safe to run again: a start's one write (answering its session's interrupted calls) is a
        transaction of its own, which a second run finds done."""
        started: list[tuple[Turn, Any, ModelRequest | Exception] | HarnessError | None] = []
        reads = StartReads.of(self.services, runs)  # one read of each kind for them all
        for run in runs:
            try:
                started.append(self._start(run, reads))
            except HarnessError as exc:
                started.append(exc)
        return started

    def _start(self, run: RunRecord, reads: StartReads) -> tuple[Turn, Any, ModelRequest | Exception] | None:
        """`_prepare` and the first model request in one trip off the loop, so a run's model call starts as soon as
        its set-up is done. Building the request may fail; that failure is handed back, and raised on the loop
        where `_model_turns` would have raised it (a set-up failure is a config error, a request failure is not).
        """
        prepared = self._prepare(run, reads)
        if prepared is None:
            return None
        turn, client = prepared
        assert run.session_id is not None
        try:
            space = self._start_index.of(self.services, turn.agent)
            first: ModelRequest | Exception = self._request(turn, space, reads.of_session(run.session_id))
        except Exception as exc:  # re-raised by `_model_turns`, exactly as if built there
            first = exc
        return turn, client, first

    def _prepare(self, run: RunRecord, reads: StartReads) -> tuple[Turn, Any] | None:
        h = self.services
        assert run.session_id is not None and run.agent_id is not None
        state = reads.states.get(run.id)
        if state is None or state[0] != "running":
            return None
        spec = spec_of(h, run)
        agent = effective_agent(h.agents.get(run.agent_id), spec)
        prompt = agent.definition.system_prompt
        if len(prompt.encode("utf-8")) > 64 * 1024:
            raise BadRequest("The system prompt is over 64 KiB.")
        opened = run.session_id in reads.open  # a session without a call open has nothing to reconcile
        calls_open = opened and reconcile_session(h, run.session_id, interrupted_text=INTERRUPTED)
        depth = delegate_verb.spawn_depth(h, run, client_roots=reads.client_roots)
        turn = Turn(run=run, agent=agent, spec=spec, calls_open=calls_open, depth=depth)
        return turn, self._client(turn)

    def _client(self, turn: Turn) -> Any:
        from mcp_harness.models.clients import client_for

        return client_for(self.services, turn.agent.definition.model_provider, sampler=self.services.sampler)

    # -- the model conversation ---------------------------------------------------------------------------------

    def _request(self, turn: Turn, space: str | None = None, read: SessionReads | None = None) -> ModelRequest:
        """The next model request; `space`: its `<space>` index, and `read`: its session's reads, when `_start` has
        them already."""
        h = self.services
        run, agent = turn.run, turn.agent
        assert run.session_id is not None
        events = h.sessions.events(run.session_id) if read is None else read.events
        pending = pending_spawns(h, run.session_id) if turn.calls_open else set[str]()
        turn.calls_open = True  # from here on the turn's own calls may be open
        messages = replay(events, pending_spawns=pending)
        messages = with_images(h, agent, run, events, messages)  # images reach a model that takes them (issue 18)
        block = plan_state(h.sessions.get_plan(run.session_id) if read is None else read.plan)
        if block:
            messages.append(Message(role="user", content=block))
        tools = list(_VERB_TOOLS)
        if turn.spawn_depth(h) + 1 > delegate_verb.MAX_DEPTH:
            tools = [t for t in tools if t.name != "delegate"]
        touched = None if read is None else read.touched
        for name, spec in promoted_callables(h, agent, run.session_id, touched=touched).items():
            tools.append(ToolSpec(name=name, description=spec.description, input_schema=spec.input_schema))
        if isinstance(turn.spec.get("output"), dict) and not turn.delivered:
            tools.append(
                ToolSpec(name="return_result", description=RETURN_RESULT_DESCRIPTION, input_schema=turn.spec["output"])
            )
        definition = agent.definition
        return ModelRequest(
            model=definition.model,
            system=system_prompt(h, agent, definition.system_prompt, space),
            messages=tuple(messages),
            tools=tuple(tools),
            reasoning_level=definition.reasoning_level,
            context_key=run.session_id,
        )

    async def _model_turns(
        self, turn: Turn, client: Any, first: ModelRequest | Exception | None = None
    ) -> Outcome | None:
        """Model replies and their tool calls until a reply calls nothing; None when the turn ended normally.
        `first` is the first request when `_start` already built it."""
        engine = self.services.engine
        while True:
            if first is None:
                request = await engine.offload(self._request, turn)
            elif isinstance(first, Exception):
                raise first
            else:
                request = first
            first = None
            try:
                response: ModelResponse = await client.complete(request)
            except ProviderError as exc:
                return Failed(code=exc.code, message=exc.message, retryable=exc.retryable, http_status=exc.http_status)
            await engine.offload_batch(self._record_replies, (turn, response))  # also computes `turn.owed`
            if not response.tool_calls:
                return None
            calls = response.tool_calls
            spawned: list[str] = []
            parked: bool | None = None
            i = 0
            while i < len(calls) and not turn.delivered:  # delivering the typed result ends the turn
                if calls[i].name != "delegate":
                    await self._tool_call(turn, calls[i])
                    i += 1
                    continue
                # A run of delegate calls is spawned in one trip and one transaction; when it ends the reply, the
                # park goes in the same transaction (unless return_result already used up its tries: that fails).
                end = i
                while end < len(calls) and calls[end].name == "delegate":
                    end += 1
                last = end == len(calls) and turn.result_failures < MAX_RETURN_RESULT_TRIES
                group = (turn, calls[i:end], spawned if last else None)
                ids, parked = await engine.offload_batch(self._delegate_groups, group)
                spawned += ids
                i = end
            if turn.delivered:
                return Succeeded(turn.payload)
            if turn.result_failures >= MAX_RETURN_RESULT_TRIES:
                return Failed(
                    code="output-schema",
                    message="Sub-session could not produce a schema-valid result; the last one was rejected for: "
                    + "; ".join(turn.last_result_errors),
                    detail={"validationErrors": turn.last_result_errors},
                )
            if spawned:
                engine.wake()
                if parked is None:
                    parked = await engine.offload(self._park_unless_answered, turn, spawned)
                if parked:
                    return Parked({"reason": "children", "toolCallIds": spawned})

    def _record_replies(self, replies: list[tuple[Turn, ModelResponse]]) -> list[None]:
        """Replies of several runs (`offload_batch`: those waiting in the lane together), each with its usage, in
        one trip and one transaction (usage accumulates on the run, HARNESS §8).

        A reply that calls nothing, with nothing owed, ends its run: its success commits in the same transaction
        (`RunEngine.settle_now_many`: the batch's ending runs in one read and one write), and with it the result's
        delivery to the parent (`settled`), so the run's last write is its terminal commit and a crash cannot land
        between the two. The deliveries and usage roll-ups of
        runs ending in one batch are made once per parent at its end (`settle_batch`, `roll_ups_grouped`): a fan-out's
        siblings end together. Safe to run again after a rollback: what it sets on a turn it sets again."""
        h = self.services
        with h.db.transaction() as conn, settle_batch.grouped(h), h.runs.roll_ups_grouped(conn):
            # A replica that lost one of these runs (taken over after this one was judged dead) must not add its
            # reply to a conversation the new holder now runs: the check rolls the whole write back, and the batch
            # run again reply by reply fails only that one. Every run here executes under this engine's lease.
            require_leases(conn, [turn.run.id for turn, _ in replies], h.engine.owner, "reply")
            # The replies go into their sessions in one append (four statements, not four per reply).
            h.sessions.append_across_within(conn, [self._reply_event(turn, response) for turn, response in replies])
            self._settle_replies(replies)
        return [None] * len(replies)

    @staticmethod
    def _reply_event(turn: Turn, response: ModelResponse) -> tuple[str, list[tuple[dict[str, Any], Actor]]]:
        assert turn.run.session_id is not None
        meta: dict[str, Any] = {
            "model": response.model or turn.agent.definition.model,
            "provider": turn.agent.definition.model_provider,
            "usage": response.usage.to_json(),
        }
        event = {"type": "message", "role": "assistant", "content": response.text, "meta": meta}
        return turn.run.session_id, [(event, "agent")]

    def _settle_replies(self, replies: list[tuple[Turn, ModelResponse]]) -> None:
        """After the replies are on record: what each run owes now, and its usage; the successes of the runs that end
        here, together (one read of their plans, one of their rows, one write: `RunEngine.settle_now_many`)."""
        h = self.services
        quiet = [turn.run.session_id for turn, response in replies if not response.tool_calls]
        plans = h.sessions.plans_of([s for s in quiet if s is not None])
        ending: list[Settlement] = []
        for turn, response in replies:
            usage = response.usage.to_json()
            spent = usage if any(usage.values()) else None
            turn.last_text = response.text or turn.last_text
            turn.owed = [] if response.tool_calls else self._owed(turn, plans.get(turn.run.session_id or ""))
            # The last reply's usage rides on the terminal write: one update of the run's row, not two.
            if not response.tool_calls and not turn.owed:
                ending.append((turn.run.id, self._success(turn), spent))
            elif spent is not None:
                h.runs.add_usage(turn.run.id, spent)
        if not ending:
            return
        for (run_id, _, spent), settled in zip(ending, h.engine.settle_now_many(ending), strict=True):
            if settled is None and spent is not None:  # not executing here (any more): the usage still counts
                h.runs.add_usage(run_id, spent)

    settles_atomically = True
    """`settled` opens its own savepoint, only when it writes (see `Executor`): a batch's leaf writes nothing there."""

    def settled(self, run: RunRecord) -> None:
        """The engine's terminal effects (see `Executor`): in the terminal commit's own transaction, settle the
        parent's plan step and deliver the result to the parent, requeueing it when this was its last child."""
        if not has_plan_step(run) and settle_batch.hold(run):
            return  # in a batch of replies: delivered with its siblings at the batch's end
        with self.services.db.transaction():  # what a failure rolls back: this run's effects, nothing else
            settle_plan_step(self.services, run)
            if not settle_batch.hold(run):
                deliver_within(self.services, run)

    def _park_unless_answered(self, turn: Turn, call_ids: list[str]) -> bool:
        """Park on the children in one transaction with the check, so a child finishing right now is never lost."""
        h = self.services
        assert turn.run.session_id is not None
        with h.db.transaction():
            answered = h.sessions.answered_calls(turn.run.session_id, call_ids)
            if set(call_ids) <= answered:
                return False
            h.runs.park(turn.run.id, {"reason": "children", "toolCallIds": call_ids})
            return True

    # -- tool calls -----------------------------------------------------------------------------------------

    async def _tool_call(self, turn: Turn, call: ToolCall) -> None:
        """Run one tool call of the model's reply other than `delegate` (see `_delegate_groups`).

        The verbs run on the worker pool, never on the engine's store lane: a read may fetch and a call may execute
        for seconds."""
        h = self.services
        run = turn.run
        assert run.session_id is not None
        ctx = VerbContext(
            services=h,
            agent=turn.agent,
            session_id=run.session_id,
            actor="agent",
            scope=Scope.of_run(run),
            call_id=call.id,
            run_id=run.id,
        )
        if call.name == "return_result" and isinstance(turn.spec.get("output"), dict):
            await h.engine.offload(self._return_result, turn, call)
            return
        if call.name in VERBS:
            verb, arguments = call.name, call.arguments
        elif call.name in await h.engine.offload(promoted_callables, h, turn.agent, run.session_id):
            verb, arguments = "call", {"tool": call.name, "input": call.arguments}
        else:
            await h.engine.offload(self._log_pair, run.session_id, call, None, f"Unknown tool {call.name}.")
            return
        if verb == "call":
            await h.invoke_async(ctx, verb, arguments, call_id=call.id)
        else:
            await anyio.to_thread.run_sync(lambda: h.invoke_sync(ctx, verb, arguments, call_id=call.id))

    def _delegate_groups(
        self, groups: list[tuple[Turn, Sequence[ToolCall], list[str] | None]]
    ) -> list[tuple[list[str], bool | None]]:
        """Runs of consecutive delegate calls, each of one run's reply, in one transaction (`offload_batch`: in a
        fan-out ten siblings' replies delegate together). Model children are checked call by call (a refused call
        logs its error and spawns nothing) and written together, with the calls that spawned them, for all the
        replies at once (`SpawnWrites`: one statement per table for the batch, not per reply), so no child is
        without its call, or vice versa. For each group `(turn, calls, park_on)` it returns the calls that spawned
        an awaited child, and, when `park_on` is given (the calls of that reply spawned before these), whether the
        run parked on all of them in the same transaction (None when it did not try). Safe to run again item by
        item: a failure rolls all of it back, and a second run draws new ids."""
        h = self.services
        with h.db.transaction() as conn:
            # Every run's lease, not only the first caller's (whose context the batch runs in): see `_record_replies`.
            require_leases(conn, [turn.run.id for turn, _, _ in groups], h.engine.owner, "delegation")
            writes = delegate_verb.SpawnWrites(h)
            spawned = [self._spawn_group(turn, calls, writes) for turn, calls, _ in groups]
            writes.flush()  # before parking: a call not yet logged would count as answered
            return [
                (ids, self._park_after(turn, park_on, ids))
                for (turn, _, park_on), ids in zip(groups, spawned, strict=True)
            ]

    def _spawn_group(self, turn: Turn, calls: Sequence[ToolCall], writes: delegate_verb.SpawnWrites) -> list[str]:
        """One group's children and logged calls, gathered in `writes` (a script or detached call is spawned on its
        own, after what was gathered before it is written: the log keeps the calls' order)."""
        h = self.services
        run = turn.run
        assert run.session_id is not None
        session_id = run.session_id
        batch = delegate_verb.ChildBatch(
            h,
            agent_id=turn.agent.id,
            parent_session_id=session_id,
            parent_run=run,
            parent_depth=turn.spawn_depth(h),
        )
        logged: list[tuple[dict[str, Any], Actor]] = []
        spawned: list[str] = []
        for call in calls:
            arguments = call.arguments
            if delegate_verb.script_source(arguments) is not None or arguments.get("await") is False:
                batch.write(session_id, logged, into=writes)
                writes.flush()
                logged = []
                if self._delegate(turn, call):
                    spawned.append(call.id)
                continue
            event = {"type": "tool_call", "id": call.id, "name": "delegate", "input": arguments}
            logged.append((event, "agent"))
            try:
                batch.add(call.id, self._child_spec(turn, arguments))
            except HarnessError as exc:
                outcome = {"type": "tool_result", "toolCallId": call.id, "name": "delegate", "error": exc.message}
                logged.append((outcome, "agent"))
            else:
                spawned.append(call.id)
        batch.write(session_id, logged, into=writes)
        return spawned

    def _park_after(self, turn: Turn, park_on: list[str] | None, spawned: list[str]) -> bool | None:
        """Whether the run parked on `park_on` and `spawned` together; None when there is nothing to try."""
        pending = [*(park_on or []), *spawned]
        if park_on is None or not pending:
            return None
        return self._park_unless_answered(turn, pending)

    @staticmethod
    def _child_spec(turn: Turn, arguments: dict[str, Any]) -> dict[str, Any]:
        spec = delegate_verb.normalize_spec(arguments)
        if isinstance(spec.get("tools"), list):
            # Narrowing is intersected with what this agent may call itself: delegation never widens authority.
            parent_tools = turn.agent.definition.tools
            spec["tools"] = [
                t
                for t in spec["tools"]
                if parent_tools is None
                or callable_alias(t) in map(callable_alias, parent_tools)
                or narrowed(parent_tools, [t])
            ]
        return spec

    def _delegate(self, turn: Turn, call: ToolCall) -> bool:
        """One script or detached delegate call: True when it spawned an awaited child (a script)."""
        h = self.services
        run = turn.run
        assert run.session_id is not None
        arguments = call.arguments
        session_id = run.session_id
        try:
            if delegate_verb.script_source(arguments) is None:
                result = delegate_verb.spawn_detached(
                    h, agent_id=turn.agent.id, parent_session_id=session_id, parent_run=run, arguments=arguments
                )
                self._log_pair(session_id, call, result, None)
                return False
            # The call is logged and the child spawned in one transaction: no child without its call, or vice versa.
            with h.db.transaction():
                h.sessions.append(
                    session_id, {"type": "tool_call", "id": call.id, "name": "delegate", "input": arguments}, "agent"
                )
                delegate_verb.spawn_script(
                    h,
                    agent_id=turn.agent.id,
                    parent_session_id=session_id,
                    parent_run=run,
                    tool_call_id=call.id,
                    arguments=arguments,
                )
            return True
        except HarnessError as exc:
            self._log_pair(session_id, call, None, exc.message)
            return False

    def _return_result(self, turn: Turn, call: ToolCall) -> None:
        assert turn.run.session_id is not None
        errors = value_errors(turn.spec["output"], call.arguments)
        if not errors:
            turn.delivered, turn.payload = True, call.arguments
            self._log_pair(turn.run.session_id, call, VerbResult.of({"accepted": True}), None)
            return
        turn.result_failures += 1
        turn.last_result_errors = errors
        if turn.result_failures >= MAX_RETURN_RESULT_TRIES:
            message = f"Result rejected (attempt limit reached): {'; '.join(errors)}."
        else:
            message = (
                f"Result does not match the required schema: {'; '.join(errors)}. Fix and call return_result again."
            )
        self._log_pair(turn.run.session_id, call, None, message)

    def _log_pair(self, session_id: str, call: ToolCall, result: VerbResult | None, error: str | None) -> None:
        outcome: dict[str, Any] = {"type": "tool_result", "toolCallId": call.id, "name": call.name}
        if error is not None:
            outcome["error"] = error
        else:
            assert result is not None
            outcome["output"] = result.data
        call_event = {"type": "tool_call", "id": call.id, "name": call.name, "input": call.arguments}
        self.services.sessions.append_many(session_id, [(call_event, "agent"), (outcome, "agent")])

    # -- obligations ------------------------------------------------------------------------------------------

    def _owed(self, turn: Turn, plan: dict[str, Any] | None) -> list[dict[str, Any]]:
        """What the run still owes once a reply called nothing; `plan`: its session's, as read with the reply's."""
        h = self.services
        run = turn.run
        owed: list[dict[str, Any]] = []
        if isinstance(turn.spec.get("output"), dict) and not turn.delivered:
            owed.append({"kind": "typed-result"})
        plan = plan or {}
        open_steps = [s["label"] for s in plan.get("steps", []) if s["status"] not in TERMINAL]
        if open_steps and not any(
            c.status in ("queued", "claimed", "running", "waiting") for c in h.runs.children(run.id)
        ):
            owed.append({"kind": "plan", "steps": open_steps})
        return owed

    async def _system_message(self, turn: Turn, text: str) -> None:
        assert turn.run.session_id is not None
        event = {"type": "message", "role": "user", "content": text}
        await self.services.engine.offload(self.services.sessions.append, turn.run.session_id, event, "system")

    def _success(self, turn: Turn) -> Outcome:
        if turn.delivered:
            return Succeeded(turn.payload)
        return Succeeded({"text": turn.last_text})
