"""The run engine: a pump that claims due runs within concurrency bounds and executes each in its own task.

Executors decide what a run does; the engine decides when, how many at once, and what becomes of the outcome (its
terminal commit and the effects that land with it: `engine_settle.py`).
Durable state lives in `RunStore`; the engine's memory holds only what executes right now. A crash or a cancelled
`serve()` therefore leaves runs 'running' in the database, and the next boot sweep requeues them — shutdown and
crash recovery are the same path. The engine is an instance (`store/instances.py`) whose id is the lease owner of
its claims, so a process booting beside a live one requeues only the runs of engines that are gone.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus

from mcp_harness.errors import HarnessError
from mcp_harness.runs.engine_settle import EngineSettle, Slot
from mcp_harness.runs.lane import StoreLane
from mcp_harness.runs.outcomes import Canceled, Failed, Outcome
from mcp_harness.runs.policy import RETRY_BASE_MS, RETRY_CAP_MS
from mcp_harness.runs.records import continued_as
from mcp_harness.store import instances, run_leases
from mcp_harness.store._util import new_id, now_ms

if TYPE_CHECKING:
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.store.runs import RunStore

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 1.0
"""The pump looks again at least this often (HARNESS §8: 'every 1 s'), even idle: a run enqueued through the store
without a `wake()` (or by another process) still starts within a second."""
ENDED_CHECK_MS = 1_000
"""How often a serving engine asks whether a run it executes was ended by another process."""
WAIT_RECHECK_S = 5.0
"""`wait_for` re-reads the row this often in case a run was finalized without going through this engine."""

_current_run: ContextVar[str | None] = ContextVar("mcp_harness_current_run", default=None)

T = TypeVar("T")


class Executor(Protocol):
    """Executes one run and reports how it ended.

    It receives the row as it stands once running. The same run may be executed again after a park and requeue,
    a retry, or a restart, so an executor rebuilds from durable state rather than from memory. Cancellation (an
    `engine.cancel`, or server shutdown) arrives as anyio's cancellation exception; cleanup must be shielded.

    An executor may also define `settled(run: RunRecord) -> None`: blocking, called inside the transaction of
    every terminal commit of its runs, whichever path made it (its own outcome, `complete`, `cancel`), under a
    savepoint of its own (a failure is logged and rolls back only what it did). It is for effects that must land
    with the terminal state, such as a child's result reaching its parent. An executor whose `settled` takes that
    savepoint itself, only when it writes, says so with `settles_atomically = True`: the engine then opens none.
    """

    async def __call__(self, run: RunRecord) -> Outcome: ...


FinalizedHook = Callable[["RunRecord"], Awaitable[None]]
"""Called on the event loop after every terminal commit, once per run."""
BootHook = Callable[[frozenset[str]], None]
"""Called once at `serve` start, blocking, in the boot sweep's transaction (before any claim), with the ids of the
live instances (`store/instances.py`): for the work of dead ones that is not a run, such as their open calls."""


@dataclass(eq=False, slots=True)
class _Waiter:
    event: anyio.Event
    record: RunRecord | None = None
    """The terminal row, handed over by `_finished` so the waiter need not read it again."""


class RunEngine(EngineSettle):
    """Dispatches queued runs to executors: bounded, one live turn per session, interactive first."""

    def __init__(
        self,
        store: RunStore,
        executors: Mapping[str, Executor],
        *,
        max_agent_runs: int = 8,
        max_workflow_runs: int = 32,
        owner: str | None = None,
        lease_ms: int = 60_000,
        retry_base_ms: int = RETRY_BASE_MS,
        retry_cap_ms: int = RETRY_CAP_MS,
        poll_interval_s: float = POLL_INTERVAL_S,
        heartbeat_ms: int | None = None,
    ) -> None:
        self.store = store
        self.executors = dict(executors)
        self.limits = {"agent": max_agent_runs, "workflow": max_workflow_runs}
        # The id's random tail: its head is the time (`new_id`), the same for engines made in one millisecond.
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id()[-8:]}"
        self.lease_ms = lease_ms
        self.retry_base_ms = retry_base_ms
        self.retry_cap_ms = retry_cap_ms
        self.poll_interval_s = poll_interval_s
        self.heartbeat_ms = instances.HEARTBEAT_MS if heartbeat_ms is None else heartbeat_ms
        """How often this engine beats (`instances`) and sweeps the runs of dead owners back to the queue: `[runs]
        heartbeat_s`, else the module's beat read when the engine is built (not at import, so a change reaches it)."""
        self.on_finalized: list[FinalizedHook] = []
        self.on_terminal: list[Callable[[Sequence[RunRecord]], None]] = []
        """Blocking hooks called inside every terminal commit's transaction, with the runs it ended (several when
        they end together, `settle_now_many`): run-completed triggers (`triggers/chain.py`). A hook writes under
        savepoints of its own (`db.transaction()`), so what it raises leaves nothing of it half done; the failure is
        logged and the terminal commit stands. (Most terminal commits find no trigger to fire: a savepoint the engine
        put around every hook cost them two statements each.)"""
        self._running: dict[str, Slot] = {}
        self._waiters: dict[str, list[_Waiter]] = {}
        # Claiming and cancelling take turns, so a run cancel_tree reports as claimed is always in `_running`.
        self._lock = anyio.Lock()
        self._wake_socket: socket.socket | None = None
        self._wake_sent = False
        """A byte is on its way to the pump, which has not started the pass that will see it: a wake now would only
        send another (a fan-out's runs each wake it, and each send released the GIL to the store lane)."""
        self._lane = StoreLane(store)
        self._beat_due = 0
        self._ended_check_due = 0
        # What a pump pass may fail with and try again after: the database's errors (PgDatabase names psycopg's).
        self._errors: tuple[type[Exception], ...] = (HarnessError, sqlite3.Error, *getattr(store.db, "errors", ()))

    # -- the store lane ----------------------------------------------------------------------------------------

    async def offload(self, fn: Callable[..., T], *args: Any, first: bool = False) -> T:
        """Run a short blocking store call (no network, no sandbox) off the event loop, on the engine's lane.

        The lane (`runs/lane.py`) runs one call at a time, first come first served, and commits the calls that
        queued up behind a running one together. In line, each run's set-up finishes in turn and its model call
        starts at once. Tool calls (which may fetch or execute for seconds) never use it. `first` goes ahead of the
        calls still waiting: the pump's claims, so children spawned early start while later ones are still spawned.
        """
        return await self._lane.call(fn, *args, first=first)

    async def offload_batch(self, fn: Callable[[list[Any]], list[T]], item: Any, *, first: bool = False) -> T:
        """`offload` of one item of a batch function: run with the items of `fn` waiting in line beside it (see
        `StoreLane.call_batch`: `fn` writes in one transaction of its own and is safe to run again item by item)."""
        return await self._lane.call_batch(fn, item, first=first)

    # -- serving -----------------------------------------------------------------------------------------------

    async def serve(
        self,
        *,
        at_boot: BootHook | None = None,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Sweep interrupted runs back to the queue (and run `at_boot`), then pump until cancelled. Start it with
        `tg.start`."""
        if self._wake_socket is not None:
            raise RuntimeError("This RunEngine is already serving.")
        # A self-pipe: writing a byte never blocks and works from any thread, so wake() needs no event-loop token.
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        self._wake_socket = writer
        self._wake_sent = False
        instances.here(self.owner)
        unhear: Callable[[], None] = _nothing
        try:
            swept = await self.offload(self._boot, at_boot)
            if swept:
                logger.info("Requeued %d run(s) left running by a process that is gone", len(swept))
            # Another replica's enqueue wakes this pump now rather than at its next poll (a hint: the poll stays).
            unhear = await anyio.to_thread.run_sync(self.store.hear_runs, self.wake)
            async with anyio.create_task_group() as tg:
                task_status.started()
                await self._pump(tg, reader)
        finally:
            unhear()
            self._wake_socket = None
            writer.close()
            reader.close()
            with anyio.CancelScope(shield=True):
                await self.offload(self._leave)

    def _boot(self, at_boot: BootHook | None) -> list[str]:
        """One transaction before the pump claims anything: this engine's instance row, then the sweep of what
        dead instances left (their runs requeued, then `at_boot` with the live instance ids). Blocking."""
        db = self.store.db
        with db.transaction() as conn:
            # Registered first, so a process booting beside this one sees it alive from now on.
            instances.touch(conn, [self.owner, db.instance_id])
            live = instances.sweep(conn)
            swept = self.store.sweep_at_boot(live)
            if at_boot is not None:
                try:
                    with db.transaction():
                        at_boot(live)
                except Exception:  # the sweep stands; what the hook did not finish waits for the next boot
                    logger.exception("The boot hook failed")
        self._beat_due = now_ms() + self.heartbeat_ms
        return swept

    def _heartbeat(self) -> None:
        """Beat, then requeue the runs of owners gone since (another replica killed -9, say): every engine sweeps,
        not only a booting one, so a fleet loses no run to a dead replica (store/run_leases.py). Blocking."""
        db = self.store.db
        with db.transaction() as conn:
            instances.touch(conn, [self.owner, db.instance_id])
        self._beat_due = now_ms() + self.heartbeat_ms
        swept = self.store.sweep_dead_owners()
        if swept:
            logger.info("Requeued %d run(s) whose engine is gone: %s", len(swept), ", ".join(swept))

    def _leave(self) -> None:
        """Serving stopped: the runs still marked running here are nobody's now (the next boot requeues them)."""
        try:
            with self.store.db.transaction() as conn:
                instances.gone(conn, self.owner)
        except sqlite3.Error:  # the database is closed already: the row only ages, as a dead process's does
            instances.gone(None, self.owner)

    def wake(self) -> None:
        """Ask the pump for a pass now. Safe from the event loop and from worker threads; a no-op when stopped."""
        writer = self._wake_socket
        if writer is None or self._wake_sent:
            return
        self._wake_sent = True
        try:
            writer.send(b"\0")
        except OSError:
            pass  # a full buffer already means a pass is pending; a closed socket means serve() just ended

    async def _pump(self, tg: TaskGroup, reader: socket.socket) -> None:
        while True:
            try:
                if now_ms() >= self._beat_due:
                    await self.offload(self._heartbeat, first=True)
                if self._running and now_ms() >= self._ended_check_due:
                    await self._stop_ended_elsewhere()
                delay = await self._pass(tg)
            except self._errors:
                logger.exception("The run pump failed; trying again shortly")
                delay = self.poll_interval_s
            delay = min(delay, max(0.0, (self._beat_due - now_ms()) / 1000))  # the beat (and sweep) is due then
            with anyio.move_on_after(delay):
                await anyio.wait_readable(reader)
            # Cleared before the pass: a wake from here on sends again, and the pass after its byte sees its cause.
            self._wake_sent = False
            _drain(reader)

    async def _stop_ended_elsewhere(self) -> None:
        """Stop executing runs another process ended (`runs cancel`) or another engine took over (this one paused
        past `instances.STALE_MS`): their writes are dropped anyway (run_leases.py); stopping saves tokens and time."""
        self._ended_check_due = now_ms() + ENDED_CHECK_MS
        ended = await self.offload(self.store.lost_among, self.owner, list(self._running), first=True)
        for run_id in ended:
            slot = self._running.get(run_id)
            if slot is not None and slot.settled is None:  # not one this engine just settled itself
                logger.info("Run %s was ended or taken over elsewhere; stopping its execution", run_id)
                slot.scope.cancel()

    async def _pass(self, tg: TaskGroup) -> float:
        """Requeue due timers, claim what capacity allows, start each claim. Returns how long to sleep."""
        async with self._lock:
            free = {kind: limit - self._count(kind) for kind, limit in self.limits.items()}
            claimed, due = await self.offload(self._dispatch, free, set(self._running), first=True)
            for run in claimed:
                slot = Slot(kind=run.kind, scope=anyio.CancelScope())
                self._running[run.id] = slot
                tg.start_soon(self._execute, run, slot, name=f"run {run.id}")
        wait_ms = None if due is None else due - now_ms()
        # Work already due but not claimed is blocked by capacity or by its session's live turn; both end with a
        # wake(), so only the poll interval applies to it.
        if wait_ms is None or wait_ms <= 0:
            return self.poll_interval_s
        return min(wait_ms / 1000, self.poll_interval_s)

    def _dispatch(self, free: dict[str, int], busy: set[str]) -> tuple[list[RunRecord], int | None]:
        """One pass's store work in one trip and one transaction: due timers requeued, the batch claimed and marked
        running (all or none), and when timed work falls due next. A pass with nothing to do (most passes: every
        run that ends asks for one) only reads."""
        timers_due, queued_due, due = self.store.pending()
        if not timers_due and not (queued_due and any(n > 0 for n in free.values())):
            return [], due
        if self.store.fleet:
            # PostgreSQL: the claim runs beside the writers (its own transaction, `claiming`), so the timers are
            # requeued before it, and the limits are the fleet's, counted from the database in the claim.
            if timers_due:
                self.store.wake_due()
            claimed = self.store.claim_batch(self.owner, free, lease_ms=self.lease_ms, exclude=busy, limits=self.limits)
            return claimed, self.store.next_due_at()
        with self.store.db.transaction():
            self.store.wake_due()
            claimed = self.store.claim_batch(self.owner, free, lease_ms=self.lease_ms, exclude=busy)
            due = self.store.next_due_at()
        return claimed, due

    def _count(self, kind: str) -> int:
        return sum(1 for slot in self._running.values() if slot.kind == kind)

    # -- executing ---------------------------------------------------------------------------------------------

    async def _execute(self, run: RunRecord, slot: Slot) -> None:
        _current_run.set(run.id)
        outcome: Outcome | None = None
        try:
            with run_leases.executing(run.id, self.owner):  # its writes to its row hold only under our lease
                outcome = await self._outcome(run, slot)
        finally:
            # Once the outcome exists, commit it and run the hooks even during shutdown: a terminal row whose
            # hooks never ran would leave its parent waiting until the next boot reconciliation. An outcome the
            # executor committed itself (`settle_now`) stands even if a shutdown cut the execution short after it.
            with anyio.CancelScope(shield=True):
                await self._conclude(run, slot, outcome)

    async def _conclude(self, run: RunRecord, slot: Slot, outcome: Outcome | None) -> None:
        try:
            settled = slot.settled
            if settled is not None:
                record, done = settled
            elif outcome is not None:
                record, done = await self.offload(self._settle, run.id, outcome, None, self.owner)
            else:
                return  # the row stopped being ours before it started, or a shutdown stopped the execution
            self._running.pop(run.id, None)
            self.wake()
            if done:
                await self._finished(record)
        finally:
            if self._running.get(run.id) is slot:
                del self._running[run.id]
                self.wake()

    async def _outcome(self, run: RunRecord, slot: Slot) -> Outcome | None:
        """Execute the run inside its own cancel scope. None when the row stopped being ours before it started."""
        outcome: Outcome | None = None
        with slot.scope:
            current: RunRecord | None = run
            if run.status != "running":
                current = await self.offload(self.store.mark_running, run.id, self.owner)
            if current is None:
                return None
            executor = self.executors.get(run.kind)
            if executor is None:
                outcome = Failed(code="no-executor", message=f"This server has no executor for {run.kind!r} runs.")
            else:
                try:
                    outcome = await executor(current)
                except Exception as exc:  # the top-level handler of a run: any bug becomes that run's failure
                    logger.exception("The executor of run %s raised", run.id)
                    outcome = Failed(code="executor-error", message=f"{type(exc).__name__}: {exc}")
        # Only our own scope's cancel gets here (a shutdown propagates past it): the run was canceled, whatever the
        # executor returned while it was being stopped.
        if slot.scope.cancel_called:
            return Canceled()
        return outcome

    async def _finished(self, record: RunRecord) -> None:
        """Fire the hooks for a terminal commit, then release `wait_for` callers (so they see the hooks' effects)."""
        try:
            with anyio.CancelScope(shield=True):
                for hook in list(self.on_finalized):
                    try:
                        await hook(record)
                    except Exception:  # one failing hook must not starve the others or the waiters
                        logger.exception("A finalize hook failed for run %s", record.id)
        finally:
            for waiter in self._waiters.pop(record.id, []):
                waiter.record = record
                waiter.event.set()

    # -- the API the agent layer uses --------------------------------------------------------------------------

    async def enqueue(self, **kwargs: Any) -> RunRecord:
        """`RunStore.enqueue` off the loop, then a pump pass."""
        record = await self.offload(functools.partial(self.store.enqueue, **kwargs))
        self.wake()
        return record

    async def requeue(self, run_id: str) -> bool:
        """Waiting → queued (e.g. a parked parent whose children have all resolved). False if it was not waiting."""
        requeued = await self.offload(self.store.requeue, run_id)
        if requeued:
            self.wake()
        return requeued

    async def add_usage(self, run_id: str, usage: dict[str, int]) -> None:
        """Accumulate spent tokens on the run (see `RunStore.add_usage`)."""
        await self.offload(self.store.add_usage, run_id, usage)

    async def complete(self, run_id: str, outcome: Outcome) -> RunRecord:
        """Record an outcome reached outside an executor (a result delivered by an MCP client, say).

        A terminal commit fires the hooks; if the run is executing here (and this is not its own task calling),
        that execution is stopped, and its own outcome is then discarded because the row is already terminal.
        """
        settled: RunRecord | None = None
        with anyio.CancelScope(shield=True):
            settled, done = await self.offload(self._settle, run_id, outcome)
            self.wake()
            if done:
                await self._finished(settled)
                slot = self._running.get(run_id)
                if slot is not None and _current_run.get() != run_id:
                    slot.scope.cancel()
        assert settled is not None  # a shielded scope swallows nothing
        return settled

    async def wait_for(self, run_id: str) -> RunRecord:
        """The run once it is terminal (at once if it already is). A script that continued as a new run
        (`ctx.continue_as_new`) is followed to the end of its chain: the final successor answers for it.

        Raises:
            NotFound: no such run.
        """
        record = await self._terminal_row(run_id)
        while (successor := continued_as(record)) is not None:
            record = await self._terminal_row(successor)
        return record

    async def _terminal_row(self, run_id: str) -> RunRecord:
        while True:
            waiter = _Waiter(anyio.Event())
            # Registered before the read, so a finalize landing between the two still wakes us.
            self._waiters.setdefault(run_id, []).append(waiter)
            try:
                record = await self.offload(self.store.get, run_id)
                if record.terminal:
                    return record
                with anyio.move_on_after(WAIT_RECHECK_S):
                    await waiter.event.wait()
                if waiter.record is not None:
                    return waiter.record  # the terminal row `_finished` was called with: no second read
            finally:
                _discard(self._waiters, run_id, waiter)

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run and its descendants. Queued and waiting ones end now; executing ones are stopped (their
        finalize becomes `Canceled`). Hooks fire for each. True when anything was affected.

        Raises:
            NotFound: no such run.
        """
        affected = False
        # Shielded: a run may cancel its own tree, and the rest of this must still happen after its scope is hit.
        with anyio.CancelScope(shield=True):
            # A script that continued as new lives on in its last successor: canceling the chain cancels that.
            run_id = (await self.offload(self.store.chain_end, run_id)).id
            async with self._lock:
                records, live = await self.offload(self._cancel_tree, run_id)
                orphans = [rid for rid in live if rid not in self._running]
                for rid in live:
                    if rid in self._running:
                        self._running[rid].scope.cancel()
            # Claimed/running rows nothing here executes were left by a stopped engine: end them in the store, or a
            # later boot sweep would requeue work that was canceled.
            for rid in orphans:
                record, done = await self.offload(self._settle, rid, Canceled())
                if done:
                    records.append(record)
            for record in records:
                await self._finished(record)
            self.wake()
            affected = bool(records or live)
        return affected

    def _cancel_tree(self, run_id: str) -> tuple[list[RunRecord], list[str]]:
        """`RunStore.cancel_tree` with the canceled rows and their terminal effects, in one transaction."""
        with self.store.db.transaction():
            canceled, live = self.store.cancel_tree(run_id)
            records = [self.store.get(rid) for rid in canceled]
            if records:
                self._terminal_effects(records)
        return records, live

    def running_ids(self) -> set[str]:
        """Runs executing in this process right now."""
        return set(self._running)


def _nothing() -> None:
    pass


def _drain(reader: socket.socket) -> None:
    try:
        while reader.recv(4096):
            pass
    except BlockingIOError:
        pass


def _discard(waiters: dict[str, list[_Waiter]], run_id: str, waiter: _Waiter) -> None:
    listed = waiters.get(run_id)
    if listed is None:
        return
    if waiter in listed:
        listed.remove(waiter)
    if not listed:
        del waiters[run_id]


__all__ = ["BootHook", "Executor", "FinalizedHook", "RunEngine"]
