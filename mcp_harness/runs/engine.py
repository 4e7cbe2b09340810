"""The run engine: a pump that claims due runs within concurrency bounds and executes each in its own task.

Executors decide what a run does; the engine decides when, how many at once, and what becomes of the outcome.
Durable state lives in `RunStore`; the engine's memory holds only what executes right now. A crash or a cancelled
`serve()` therefore leaves runs 'running' in the database, and the next boot sweep requeues them — shutdown and
crash recovery are the same path.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus

from mcp_harness.errors import HarnessError
from mcp_harness.runs.outcomes import Canceled, Failed, Outcome
from mcp_harness.runs.policy import RETRY_BASE_MS, RETRY_CAP_MS
from mcp_harness.store._util import new_id, now_ms

if TYPE_CHECKING:
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.store.runs import RunStore

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 1.0
"""The pump looks again at least this often (HARNESS §8: 'every 1 s'), even idle: a run enqueued through the store
without a `wake()` (or by another process) still starts within a second."""
WAIT_RECHECK_S = 5.0
"""`wait_for` re-reads the row this often in case a run was finalized without going through this engine."""

_current_run: ContextVar[str | None] = ContextVar("mcp_harness_current_run", default=None)


class Executor(Protocol):
    """Executes one run and reports how it ended.

    It receives the row as it stands once running. The same run may be executed again after a park and requeue,
    a retry, or a restart, so an executor rebuilds from durable state rather than from memory. Cancellation (an
    `engine.cancel`, or server shutdown) arrives as anyio's cancellation exception; cleanup must be shielded.
    """

    async def __call__(self, run: RunRecord) -> Outcome: ...


FinalizedHook = Callable[["RunRecord"], Awaitable[None]]
"""Called on the event loop after every terminal commit, once per run."""


@dataclass(frozen=True, slots=True)
class _Slot:
    kind: str
    scope: anyio.CancelScope


class RunEngine:
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
    ) -> None:
        self.store = store
        self.executors = dict(executors)
        self.limits = {"agent": max_agent_runs, "workflow": max_workflow_runs}
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id()[:8]}"
        self.lease_ms = lease_ms
        self.retry_base_ms = retry_base_ms
        self.retry_cap_ms = retry_cap_ms
        self.poll_interval_s = poll_interval_s
        self.on_finalized: list[FinalizedHook] = []
        self._running: dict[str, _Slot] = {}
        self._waiters: dict[str, list[anyio.Event]] = {}
        # Claiming and cancelling take turns, so a run cancel_tree reports as claimed is always in `_running`.
        self._lock = anyio.Lock()
        self._wake_socket: socket.socket | None = None

    # -- serving -----------------------------------------------------------------------------------------------

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Sweep interrupted runs back to the queue, then pump until cancelled. Start it with `tg.start`."""
        if self._wake_socket is not None:
            raise RuntimeError("This RunEngine is already serving.")
        # A self-pipe: writing a byte never blocks and works from any thread, so wake() needs no event-loop token.
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        self._wake_socket = writer
        try:
            swept = await anyio.to_thread.run_sync(self.store.sweep_at_boot)
            if swept:
                logger.info("Requeued %d run(s) left running by the previous process", len(swept))
            async with anyio.create_task_group() as tg:
                task_status.started()
                await self._pump(tg, reader)
        finally:
            self._wake_socket = None
            writer.close()
            reader.close()

    def wake(self) -> None:
        """Ask the pump for a pass now. Safe from the event loop and from worker threads; a no-op when stopped."""
        writer = self._wake_socket
        if writer is None:
            return
        try:
            writer.send(b"\0")
        except OSError:
            pass  # a full buffer already means a pass is pending; a closed socket means serve() just ended

    async def _pump(self, tg: TaskGroup, reader: socket.socket) -> None:
        while True:
            try:
                delay = await self._pass(tg)
            except (HarnessError, sqlite3.Error):
                logger.exception("The run pump failed; trying again shortly")
                delay = self.poll_interval_s
            with anyio.move_on_after(delay):
                await anyio.wait_readable(reader)
            _drain(reader)

    async def _pass(self, tg: TaskGroup) -> float:
        """Requeue due timers, claim what capacity allows, start each claim. Returns how long to sleep."""
        await anyio.to_thread.run_sync(self.store.wake_due)
        async with self._lock:
            free = {kind: limit - self._count(kind) for kind, limit in self.limits.items()}
            claimed = await anyio.to_thread.run_sync(self._claim_batch, free, set(self._running))
            for run in claimed:
                slot = _Slot(kind=run.kind, scope=anyio.CancelScope())
                self._running[run.id] = slot
                tg.start_soon(self._execute, run, slot, name=f"run {run.id}")
        due = await anyio.to_thread.run_sync(self.store.next_due_at)
        wait_ms = None if due is None else due - now_ms()
        # Work already due but not claimed is blocked by capacity or by its session's live turn; both end with a
        # wake(), so only the poll interval applies to it.
        if wait_ms is None or wait_ms <= 0:
            return self.poll_interval_s
        return min(wait_ms / 1000, self.poll_interval_s)

    def _claim_batch(self, free: dict[str, int], busy: set[str]) -> list[RunRecord]:
        claimed: list[RunRecord] = []
        while kinds := [kind for kind, n in free.items() if n > 0]:
            try:
                run = self.store.claim_next(self.owner, kinds=kinds, lease_ms=self.lease_ms, exclude=busy)
            except (HarnessError, sqlite3.Error):
                if not claimed:
                    raise
                # The rows claimed so far must still be started, or they would sit 'claimed' until a restart.
                logger.exception("Claiming runs failed part-way; starting the %d already claimed", len(claimed))
                break
            if run is None:
                break
            # Marked running in the same trip as the claim: one hop per run fewer when many start at once.
            running = self.store.mark_running(run.id)
            claimed.append(running if running is not None else run)
            free[run.kind] -= 1
        return claimed

    def _count(self, kind: str) -> int:
        return sum(1 for slot in self._running.values() if slot.kind == kind)

    # -- executing ---------------------------------------------------------------------------------------------

    async def _execute(self, run: RunRecord, slot: _Slot) -> None:
        _current_run.set(run.id)
        try:
            outcome = await self._outcome(run, slot)
            if outcome is None:
                return
            # Once the outcome exists, commit it and run the hooks even during shutdown: a terminal row whose
            # hooks never ran would leave its parent waiting until the next boot reconciliation.
            with anyio.CancelScope(shield=True):
                record, done = await anyio.to_thread.run_sync(self._settle, run.id, outcome)
                self._running.pop(run.id, None)
                self.wake()
                if done:
                    await self._finished(record)
        finally:
            if self._running.get(run.id) is slot:
                del self._running[run.id]
                self.wake()

    async def _outcome(self, run: RunRecord, slot: _Slot) -> Outcome | None:
        """Execute the run inside its own cancel scope. None when the row stopped being ours before it started."""
        outcome: Outcome | None = None
        with slot.scope:
            current: RunRecord | None = run
            if run.status != "running":
                current = await anyio.to_thread.run_sync(self.store.mark_running, run.id)
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

    def _settle(self, run_id: str, outcome: Outcome) -> tuple[RunRecord, bool]:
        return self.store.settle(run_id, outcome, retry_base_ms=self.retry_base_ms, retry_cap_ms=self.retry_cap_ms)

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
            for event in self._waiters.pop(record.id, []):
                event.set()

    # -- the API the agent layer uses --------------------------------------------------------------------------

    async def enqueue(self, **kwargs: Any) -> RunRecord:
        """`RunStore.enqueue` off the loop, then a pump pass."""
        record = await anyio.to_thread.run_sync(functools.partial(self.store.enqueue, **kwargs))
        self.wake()
        return record

    async def requeue(self, run_id: str) -> bool:
        """Waiting → queued (e.g. a parked parent whose children have all resolved). False if it was not waiting."""
        requeued = await anyio.to_thread.run_sync(self.store.requeue, run_id)
        if requeued:
            self.wake()
        return requeued

    async def add_usage(self, run_id: str, usage: dict[str, int]) -> None:
        """Accumulate spent tokens on the run (see `RunStore.add_usage`)."""
        await anyio.to_thread.run_sync(self.store.add_usage, run_id, usage)

    async def complete(self, run_id: str, outcome: Outcome) -> RunRecord:
        """Record an outcome reached outside an executor (a result delivered by an MCP client, say).

        A terminal commit fires the hooks; if the run is executing here (and this is not its own task calling),
        that execution is stopped, and its own outcome is then discarded because the row is already terminal.
        """
        settled: RunRecord | None = None
        with anyio.CancelScope(shield=True):
            settled, done = await anyio.to_thread.run_sync(self._settle, run_id, outcome)
            self.wake()
            if done:
                await self._finished(settled)
                slot = self._running.get(run_id)
                if slot is not None and _current_run.get() != run_id:
                    slot.scope.cancel()
        assert settled is not None  # a shielded scope swallows nothing
        return settled

    async def wait_for(self, run_id: str) -> RunRecord:
        """The run once it is terminal (at once if it already is).

        Raises:
            NotFound: no such run.
        """
        while True:
            event = anyio.Event()
            # Registered before the read, so a finalize landing between the two still wakes us.
            waiters = self._waiters.setdefault(run_id, [])
            waiters.append(event)
            try:
                record = await anyio.to_thread.run_sync(self.store.get, run_id)
                if record.terminal:
                    return record
                with anyio.move_on_after(WAIT_RECHECK_S):
                    await event.wait()
            finally:
                _discard(self._waiters, run_id, event)

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run and its descendants. Queued and waiting ones end now; executing ones are stopped (their
        finalize becomes `Canceled`). Hooks fire for each. True when anything was affected.

        Raises:
            NotFound: no such run.
        """
        affected = False
        # Shielded: a run may cancel its own tree, and the rest of this must still happen after its scope is hit.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                canceled, live = await anyio.to_thread.run_sync(self.store.cancel_tree, run_id)
                orphans = [rid for rid in live if rid not in self._running]
                for rid in live:
                    if rid in self._running:
                        self._running[rid].scope.cancel()
            # Claimed/running rows nothing here executes were left by a stopped engine: end them in the store, or a
            # later boot sweep would requeue work that was canceled.
            for rid in orphans:
                _, done = await anyio.to_thread.run_sync(self._settle, rid, Canceled())
                if done:
                    canceled.append(rid)
            records = await anyio.to_thread.run_sync(lambda: [self.store.get(rid) for rid in canceled])
            for record in records:
                await self._finished(record)
            self.wake()
            affected = bool(canceled or live)
        return affected

    def running_ids(self) -> set[str]:
        """Runs executing in this process right now."""
        return set(self._running)


def _drain(reader: socket.socket) -> None:
    try:
        while reader.recv(4096):
            pass
    except BlockingIOError:
        pass


def _discard(waiters: dict[str, list[anyio.Event]], run_id: str, event: anyio.Event) -> None:
    listed = waiters.get(run_id)
    if listed is None:
        return
    if event in listed:
        listed.remove(event)
    if not listed:
        del waiters[run_id]


__all__ = ["Executor", "FinalizedHook", "RunEngine"]
