"""The composition root: opens the store once and hands services to the verbs, the server and the CLI.

`invoke` is the one code path for a verb call, whoever the actor is: validate against the contract, log the
`tool_call`, run the verb, log the `tool_result`. Synchronous verbs (memory, introspection, plan) run on one worker
thread end to end, so a call costs a single hop off the event loop.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.to_thread

from mcp_harness.config import Settings
from mcp_harness.definition import AgentDefinition
from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.memory.store import MemoryStore
from mcp_harness.spaces.registry import uses_network
from mcp_harness.store import AgentRecord, AgentStore, Database, SessionStore
from mcp_harness.store.attachments import AttachmentStore
from mcp_harness.store.change_bus import start_change_bus
from mcp_harness.store.open import open_serving_store
from mcp_harness.store.sessions import Actor
from mcp_harness.store.tools import ToolStore
from mcp_harness.store.triggers import TriggerStore
from mcp_harness.verbs import call as call_verb
from mcp_harness.verbs import delegate as delegate_verb
from mcp_harness.verbs import plan as plan_verb
from mcp_harness.verbs import read as read_verb
from mcp_harness.verbs import write as write_verb
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.call_events import call_event, new_call_id, outcome_event
from mcp_harness.verbs.contracts import VERBS, input_errors

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from mcp_harness.callables.upstream import ServerSpec, Upstreams
    from mcp_harness.hypermedia.node import Node
    from mcp_harness.hypermedia.sync import Sync
    from mcp_harness.models.providers import ProviderRegistry
    from mcp_harness.models.wire import Sampler
    from mcp_harness.runs.engine import Executor, RunEngine
    from mcp_harness.sandbox import Sandbox
    from mcp_harness.store.runs import RunRecord, RunStore
    from mcp_harness.store.secrets import SecretStore
    from mcp_harness.store.upstream_tools import UpstreamStore
    from mcp_harness.triggers.monitor import ActivityMonitor
    from mcp_harness.triggers.scheduler import Scheduler
    from mcp_harness.upstream.mounts import Mounts
    from mcp_harness.web.egress import Egress

logger = logging.getLogger(__name__)
T = TypeVar("T")

LOCAL_ACCOUNT = "local"
MONITOR_START_DELAY_S = 1.0
"""How long after the engine starts the activity monitor begins: its imports (the node, PyNaCl) would otherwise
compete with a stdio client's handshake for the interpreter. Nothing is missed: it resumes from its watermark."""
ENGINE_AFTER_S = 0.2
"""How long after a stdio `serve` starts its engine does (the boot sweep, the scheduler, mounted servers): the
client spawned the process to talk to it, so the handshake and the first `tools/list` go first. Queued runs wait
that long once; the sweep still runs before the engine claims anything."""
CANCELED_TEXT = (
    "Canceled before it finished; whether its side effects happened is unknown. Verify state before retrying."
)

SyncVerb = Callable[[VerbContext, dict[str, Any]], VerbResult]


HANDLERS: dict[str, SyncVerb] = {
    "read": read_verb.read,
    "write": write_verb.write,
    "plan": plan_verb.plan,
}
ASYNC_VERBS = frozenset({"call", "delegate"})
"""Verbs that may run for minutes (sandboxes, later the network): they await instead of holding a worker thread."""

AsyncVerb = Callable[[VerbContext, dict[str, Any]], Awaitable[VerbResult]]
ASYNC_HANDLERS: dict[str, AsyncVerb] = {"call": call_verb.call, "delegate": delegate_verb.delegate}
ASYNC_PREPARE: dict[str, Callable[[VerbContext, dict[str, Any]], Any]] = {"call": call_verb.prepare}
"""A long-running verb's first blocking look-up, run in the hop that logs its call (`VerbContext.prepared`)."""
UNLOGGED_VERBS = frozenset({"plan"})
"""Plan calls write no transcript events (HARNESS §1.1): the checklist is state, not conversation."""


class Harness:
    """Everything a verb may touch, opened once per process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.data_dir = settings.data_dir
        # PgDatabase meets Database's port (store/port.py); the stores are typed against Database until they move
        # to that Protocol, hence the cast rather than a union every store would refuse.
        self.db = cast(Database, open_serving_store(settings))
        self._change_bus = start_change_bus(self.db)
        """PostgreSQL: this replica's commits announced to the others, theirs heard (store/change_bus.py)."""
        self.agents = AgentStore(self.db, settings.data_dir)
        self.sessions = SessionStore(self.db)
        self.tools = ToolStore(self.db)
        self.triggers = TriggerStore(self.db)
        self.attachments = AttachmentStore(self.db, settings.data_dir / "attachments")
        """Sessions' files (`read attachment:<id>`), content-addressed beside the memory trees."""
        self.account_id = LOCAL_ACCOUNT
        self.verbs = VERBS
        """The verbs' contracts (`verbs/contracts.py`), for the spaces that list them."""
        self._memories: dict[str, MemoryStore] = {}
        self._sandbox: Sandbox | None = None
        self._secrets: SecretStore | None = None
        self._providers: ProviderRegistry | None = None
        self._runs: RunStore | None = None
        self._engine: RunEngine | None = None
        self._web: Egress | None = None
        self._hypermedia: Node | None = None
        self._sync: Sync | None = None
        self._scheduler: Scheduler | None = None
        self._monitor: ActivityMonitor | None = None
        self._upstream_store: UpstreamStore | None = None
        self._configured_servers: dict[str, ServerSpec] | None = None
        self._mounts: Mounts | None = None
        self._engine_users = 0
        self.awaited_children: set[str] = set()
        """Child runs an MCP client's delegate call in this process is waiting on (it writes their result)."""
        self.sampler: Sampler | None = None
        """Set by the MCP front when the connected client can sample with tools (the `sampling` provider)."""
        self.agents.ensure_account(self.account_id, "local owner")

    def close(self) -> None:
        if self._change_bus is not None:
            self._change_bus.close()
        self.db.close()

    # -- agents --------------------------------------------------------------------------------------------

    def default_definition(self) -> AgentDefinition:
        """The default agent as `[agent]` describes it, checked (`definition_config.py`).

        Raises:
            BadRequest: naming the `[agent]` setting that is wrong and what is accepted.
        """
        from mcp_harness.definition_config import configured_definition

        def signing_key(ref: str) -> str:
            from mcp_harness.identity.identities import resolve_identity  # imports PyNaCl: only when needed

            return resolve_identity(self, ref).name

        return configured_definition(self.settings.agent, self.providers, signing_key)

    def agent(self, name_or_id: str | None = None) -> AgentRecord:
        """The named agent, or the configured default agent (created from config on first use)."""
        wanted = name_or_id or self.settings.agent.name
        found = self.agents.find(self.account_id, wanted)
        if found is not None:
            return found
        if name_or_id is not None and name_or_id != self.settings.agent.name:
            names = ", ".join(a.definition.name for a in self.agents.list(self.account_id)) or "(none)"
            raise BadRequest(
                f"No agent named {name_or_id!r}. Agents: {names}. Create one with `mcp-harness agent create`."
            )
        definition = self.default_definition()
        self.check_definition(definition)
        return self.create_agent(definition)

    def create_agent(self, definition: AgentDefinition) -> AgentRecord:
        """Create an agent (a checked definition, its name unused on the account) with its default mention
        trigger when its primary signing key is an identity (HARNESS §10; `triggers/defaults.py`).

        Raises:
            Conflict: an agent with that name exists.
        """
        from mcp_harness.triggers.defaults import create_default_mention_trigger

        with self.db.transaction():
            record = self.agents.create(self.account_id, definition)
            create_default_mention_trigger(self, record)
        return record

    def memory(self, agent: AgentRecord) -> MemoryStore:
        store = self._memories.get(agent.id)
        if store is None:
            store = self._memories[agent.id] = MemoryStore(agent.memory_dir)
        return store

    @property
    def runs(self) -> RunStore:
        if self._runs is None:
            from mcp_harness.store.runs import RunStore

            self._runs = RunStore(self.db)
        return self._runs

    def _agent_executor(self) -> Executor:
        from mcp_harness.runs.agent import AgentExecutor

        return AgentExecutor(self)

    def _script_executor(self) -> Executor:
        from mcp_harness.runs.script import ScriptExecutor

        return ScriptExecutor(self)

    @property
    def engine(self) -> RunEngine:
        """The run engine: agent turns and children, queued durably, executed here while the server runs."""
        if self._engine is None:
            from mcp_harness.runs.engine import RunEngine
            from mcp_harness.runs.lazy import LazyExecutor
            from mcp_harness.runs.resolve import on_finalized

            self._engine = RunEngine(
                self.runs,
                {"agent": LazyExecutor(self._agent_executor), "workflow": LazyExecutor(self._script_executor)},
                max_agent_runs=self.settings.runs.max_agent_runs,
                heartbeat_ms=int(self.settings.runs.heartbeat_s * 1000),
            )

            async def hook(run: RunRecord) -> None:
                await on_finalized(self, run)

            self._engine.on_finalized.append(hook)
            from mcp_harness.triggers.chain import on_run_terminal

            self._engine.on_terminal.append(lambda runs: on_run_terminal(self, runs))
        return self._engine

    @property
    def engine_owner(self) -> str | None:
        """The serving engine's instance id (its heartbeat row, `store/instances.py`), None while none serves."""
        return self._engine.owner if self._engine is not None and self._engine_users > 0 else None

    @property
    def scheduler(self) -> Scheduler:
        """Fires schedule triggers while the engine runs (`engine_running`); tests may replace its `clock`."""
        if self._scheduler is None:
            from mcp_harness.triggers.scheduler import Scheduler

            self._scheduler = Scheduler(
                self, wake_engine=self.engine.wake, poll_interval_s=self.settings.triggers.poll_interval_s
            )
        return self._scheduler

    @property
    def monitor(self) -> ActivityMonitor:
        """Fires comment, mention and site-update triggers (and wakes activity waits) as blobs land, while the
        engine runs (`triggers/monitor.py`)."""
        if self._monitor is None:
            from mcp_harness.triggers.monitor import ActivityMonitor

            self._monitor = ActivityMonitor(
                self,
                self.hypermedia.activity,
                account_id=self.account_id,
                wake_engine=self.engine.wake,
                poll_interval_s=self.settings.triggers.poll_interval_s,
            )
        return self._monitor

    async def _serve_monitor(self) -> None:
        """The activity monitor, off start-up's path: its modules (the node, PyNaCl) load on a worker thread while
        the server already answers; what lands meanwhile waits in the feed past its watermark."""
        import importlib

        await anyio.sleep(MONITOR_START_DELAY_S)  # let the client's handshake and first list go first
        await anyio.to_thread.run_sync(importlib.import_module, "mcp_harness.triggers.monitor")
        await anyio.to_thread.run_sync(importlib.import_module, "mcp_harness.hypermedia.node")
        await self.monitor.serve()

    @asynccontextmanager
    async def engine_running(self, *, after_s: float = 0.0) -> AsyncIterator[None]:
        """Run the engine, and the trigger scheduler and activity monitor beside it, for the duration of the block
        (nested uses share the first one's). With `after_s`, all of it starts that long after the block is entered:
        a stdio server answers its client's handshake and first list first (`serve`; ENGINE_AFTER_S)."""
        if self._engine_users > 0:
            self._engine_users += 1
            try:
                yield
            finally:
                self._engine_users -= 1
            return
        self._engine_users = 1
        try:
            async with anyio.create_task_group() as tg:
                if after_s > 0:

                    async def later() -> None:
                        await anyio.sleep(after_s)
                        await self._start_engine(tg)

                    tg.start_soon(later)
                else:
                    await self._start_engine(tg)
                try:
                    yield
                finally:
                    if self._mounts is not None:
                        await self._mounts.aclose()
                    tg.cancel_scope.cancel()
        finally:
            self._engine_users = 0

    async def _start_engine(self, tg: TaskGroup) -> None:
        from functools import partial

        from mcp_harness.runs.resolve import answer_orphaned, reconcile_at_boot

        # Calls dead processes left open are answered in the boot sweep, before the engine claims anything.
        await tg.start(partial(self.engine.serve, at_boot=partial(answer_orphaned, self)))
        await reconcile_at_boot(self)
        # Triggers fire beside the engine, whoever is connected (nobody, for a headless `serve --http`).
        await tg.start(self.scheduler.serve)
        tg.start_soon(self._serve_monitor)
        if self.settings.hypermedia.servers:
            tg.start_soon(self._serve_pusher)
        self._mounted().attach(tg)

    # -- other MCP servers (issue 20) ------------------------------------------------------------------------

    @property
    def upstream_store(self) -> UpstreamStore:
        """Mounted servers (`mcp add`) and their tools' documents; no MCP client is loaded to read them."""
        if self._upstream_store is None:
            from mcp_harness.store.upstream_tools import UpstreamStore

            self._upstream_store = UpstreamStore(self.db)
        return self._upstream_store

    def mcp_servers(self) -> dict[str, ServerSpec]:
        """Every mounted MCP server by name: `[[mcp.servers]]`, then those `mcp add` stored. Blocking."""
        from mcp_harness.callables.upstream import configured, mounted

        if self._configured_servers is None:
            self._configured_servers = configured(self.settings.mcp.servers)
        return mounted(self._configured_servers, self.upstream_store)

    @property
    def upstreams(self) -> Upstreams:
        """The MCP client side, built on first use (the SDK's client is not paid by a stdio cold start). While the
        engine runs its connections are kept warm in the engine's task group; otherwise each use connects anew."""
        return self._mounted().pool()

    def _secret_text(self, name: str) -> str:
        return self.secrets.get_value(self.account_id, name).decode("utf-8")

    def _mounted(self) -> Mounts:
        if self._mounts is None:
            from mcp_harness.upstream.mounts import Mounts

            self._mounts = Mounts(
                self.mcp_servers, self._secret_text, lambda: self.upstream_store, MONITOR_START_DELAY_S
            )
        return self._mounts

    @property
    def secrets(self) -> SecretStore:
        """Sealed secrets; the master key is loaded on first use, so serving without secrets never needs it."""
        if self._secrets is None:
            from mcp_harness.store.secrets import SecretStore

            self._secrets = SecretStore(self.db, self.settings)
        return self._secrets

    @property
    def providers(self) -> ProviderRegistry:
        """Model providers: built-in (scripted, sampling), from config, and added with the CLI."""
        if self._providers is None:
            from mcp_harness.models.providers import ProviderRegistry

            # The vault is a callable so that building the registry never loads the master key.
            self._providers = ProviderRegistry(
                self.settings, self.db, agents=self.agents, vault=lambda: self.secrets, account_id=self.account_id
            )
        return self._providers

    def check_definition(self, definition: AgentDefinition) -> None:
        """What a definition names must exist: its model provider and its signing identities (400 otherwise)."""
        self.providers.require(definition.model_provider)
        if definition.signing_key or definition.signing_keys:
            from mcp_harness.identity.identities import check_signing_keys  # imports PyNaCl: only when needed

            check_signing_keys(self, definition)

    @property
    def sandbox(self) -> Sandbox:
        """The code sandbox, built on first use so that start-up never pays for probing bubblewrap."""
        if self._sandbox is None:
            from mcp_harness.sandbox import Sandbox

            self._sandbox = Sandbox(self.settings.sandbox)
        return self._sandbox

    def sandbox_runtimes(self) -> tuple[str, ...]:
        """Runtimes `execute` and lambdas can use here (empty without a working sandbox). Blocking on first use."""
        sandbox = self.sandbox
        return sandbox.runtimes if sandbox.available else ()

    @property
    def web(self) -> Egress:
        """The guarded HTTP client every outbound fetch goes through (DESIGN §6)."""
        if self._web is None:
            from mcp_harness.web.egress import Egress

            self._web = Egress(self.settings.web)
        return self._web

    @property
    def hypermedia(self) -> Node:
        """The embedded hypermedia node (signed documents, comments, profiles) in this database."""
        if self._hypermedia is None:
            from mcp_harness.hypermedia.node import Node

            hm = self.settings.hypermedia
            node = Node(self.db, max_blob_bytes=hm.max_blob_bytes, max_request_bytes=hm.max_request_bytes)
            self._hypermedia = node
            if hm.servers:  # what is published is owed to the auto-push servers in the same commit (issue 19)
                node.publish_hooks.append(self.sync.hook)
        return self._hypermedia

    @property
    def sync(self) -> Sync:
        """Push to and pull from the `[[hypermedia.servers]]` (hypermedia/sync/); built on first use."""
        if self._sync is None:
            from mcp_harness.hypermedia.sync import Sync

            self._sync = Sync(
                self.db,
                self.hypermedia,
                self.settings.hypermedia,
                self.web,
                self._secret_text,
            )
        return self._sync

    async def _serve_pusher(self) -> None:
        """The push worker, off start-up's path like the monitor: it resumes what an earlier process left owed."""
        await anyio.sleep(MONITOR_START_DELAY_S)
        await anyio.to_thread.run_sync(lambda: self.hypermedia)
        await self.sync.pusher.serve()

    def offered_callables(self) -> frozenset[str]:
        """Builtin callables this host can run: `execute` with a sandbox, `web_search` with a SearXNG URL."""
        from mcp_harness.callables.registry import offered_callables

        return offered_callables(self)

    def grants(self, definition: AgentDefinition) -> dict[str, Any]:
        """What the agent may do beyond the verbs: its callable tools and whether it may publish."""
        from mcp_harness.grants import effective_grants

        return effective_grants(self, definition)

    # -- verbs ---------------------------------------------------------------------------------------------

    def invoke_sync(
        self, ctx: VerbContext, verb: str, arguments: dict[str, Any], call_id: str | None = None
    ) -> tuple[VerbResult | None, HarnessError | None]:
        """Run one verb call with its log events. Returns the result or the refusal (never raises a HarnessError).

        The verbs here finish in milliseconds, so the `tool_call`, the verb's own database changes and the
        `tool_result` commit as one transaction: a crash leaves either the whole call in the log or none of it, and
        a call costs one commit instead of two. (Long-running callables will log their `tool_call` before they
        start, so a crash mid-call stays visible.)
        """
        if ctx.session_id is None or verb in UNLOGGED_VERBS:
            return self._run_verb(ctx, verb, arguments)
        call_id = call_id or new_call_id(ctx.actor)
        if uses_network(verb, arguments):  # as the address's space declares (spaces/registry.py)
            # A fetch may take seconds: it must not hold the database. The call is logged first, on its own.
            self.sessions.append(ctx.session_id, call_event(verb, call_id, arguments), ctx.actor)
            result, error = self._run_verb(ctx, verb, arguments)
            self._answer_once(ctx.session_id, call_id, outcome_event(verb, call_id, result, error), ctx.actor)
            return result, error
        with self.db.transaction() as conn:
            result, error = self._run_verb(ctx, verb, arguments)
            outcome = outcome_event(verb, call_id, result, error)
            self.sessions.append_many_within(
                conn, ctx.session_id, [(call_event(verb, call_id, arguments), ctx.actor), (outcome, ctx.actor)]
            )
        return result, error

    async def invoke_async(
        self,
        ctx: VerbContext,
        verb: str,
        arguments: dict[str, Any],
        call_id: str | None = None,
        *,
        logged: bool = False,
    ) -> tuple[VerbResult | None, HarnessError | None]:
        """A long-running verb: its `tool_call` is committed before it starts, so a crash mid-call stays visible.
        `logged`: the caller committed it already (`log_call_sync`, with `call_id`), in the hop that built `ctx`."""
        handler = ASYNC_HANDLERS[verb]
        return await self._logged(
            ctx, verb, arguments, lambda c: handler(c, arguments), call_id, answer=True, logged=logged
        )

    def log_call_sync(self, ctx: VerbContext, verb: str, arguments: dict[str, Any], call_id: str | None = None) -> str:
        """Commit a long-running call's `tool_call` before it starts (`invoke_async(..., logged=True)` runs it);
        returns its id (`call_id`, else a new one). Blocking."""
        call_id = call_id or new_call_id(ctx.actor)
        if ctx.session_id is not None:
            with self.db.joined() as conn:  # a failure here fails the caller's transaction (`begin`) whole
                self.sessions.append_within(conn, ctx.session_id, call_event(verb, call_id, arguments), ctx.actor)
        return call_id

    async def start_async(
        self, ctx: VerbContext, verb: str, arguments: dict[str, Any], start: Callable[[VerbContext], Awaitable[T]]
    ) -> tuple[T | None, HarnessError | None]:
        """Begin a verb whose answer comes later (a delegate task): the call is logged and `start` run; a refusal
        is logged as the call's result at once, a success is answered later by whoever finishes the work."""
        return await self._logged(ctx, verb, arguments, start, None, answer=False)

    async def _logged(
        self,
        ctx: VerbContext,
        verb: str,
        arguments: dict[str, Any],
        run: Callable[[VerbContext], Awaitable[T]],
        call_id: str | None,
        *,
        answer: bool,
        logged: bool = False,
    ) -> tuple[T | None, HarnessError | None]:
        """Log the call (unless `logged`: the caller did), check its input, run it; log its outcome (a refusal
        always, a success when `answer`)."""
        call_id = call_id or new_call_id(ctx.actor)
        if ctx.session_id is not None and not logged:
            call = call_event(verb, call_id, arguments)
            await anyio.to_thread.run_sync(self.sessions.append, ctx.session_id, call, ctx.actor)
        result: T | None = None
        error: HarnessError | None = None
        try:
            problems = input_errors(verb, arguments)
            if problems:
                raise self._invalid(verb, problems)
            result = await run(ctx if ctx.call_id == call_id else dataclasses.replace(ctx, call_id=call_id))
        except HarnessError as exc:
            error = exc
        except OSError as exc:
            logger.exception("verb %s failed on disk", verb)
            error = HarnessError(f"{verb} failed: {exc.strerror or exc}.")
        except anyio.get_cancelled_exc_class():
            # The caller gave up (or the run was canceled): the call still gets its one answer, now, rather than an
            # "interrupted" one at the next boot. A child's own delivery may have answered it first; that one stands.
            if ctx.session_id is not None:
                outcome = outcome_event(verb, call_id, None, HarnessError(CANCELED_TEXT))
                with anyio.CancelScope(shield=True):
                    await self.db.quick(partial(self._answer_once, ctx.session_id, call_id, outcome, ctx.actor))
            raise
        if ctx.session_id is not None and (answer or error is not None):
            data = result if isinstance(result, VerbResult) else None
            outcome = outcome_event(verb, call_id, data, error)
            with anyio.CancelScope(shield=True):
                # On the loop when the database is free: the hop cost more than the append (`Database.quick`).
                await self.db.quick(partial(self._answer_once, ctx.session_id, call_id, outcome, ctx.actor))
        return result, error

    def _answer_once(self, session_id: str, call_id: str, outcome: dict[str, Any], actor: Actor) -> None:
        """Append a call's result unless something (a child's delivery) already answered it."""
        with self.db.joined() as conn:  # `quick`'s transaction, or its own: either way nothing catches a failure
            if call_id not in self.sessions.answered_calls(session_id, [call_id]):
                self.sessions.append_within(conn, session_id, outcome, actor)

    @staticmethod
    def _invalid(verb: str, problems: list[str]) -> BadRequest:
        fields = ", ".join(VERBS[verb].input_schema["properties"])
        return BadRequest(
            f"Invalid input for {verb}: {'; '.join(problems)}. Accepted fields: {fields} "
            f"(read ~/tools/{verb} for the contract)."
        )

    def _run_verb(
        self, ctx: VerbContext, verb: str, arguments: dict[str, Any]
    ) -> tuple[VerbResult | None, HarnessError | None]:
        try:
            problems = input_errors(verb, arguments)
            if problems:
                raise self._invalid(verb, problems)
            return HANDLERS[verb](ctx, arguments), None
        except HarnessError as exc:
            return None, exc
        except OSError as exc:
            logger.exception("verb %s failed on disk", verb)
            return None, HarnessError(f"{verb} failed: {exc.strerror or exc}.")
