"""The engine's store lane: short blocking store calls, one at a time in arrival order, committed in groups.

Why a lane: the store has one SQLite connection behind one lock, so running these calls side by side on many threads
gains nothing and made them slower (ten runs starting at once put ten threads in a convoy on that lock and the GIL,
and each of their first model requests went out only when the slowest had finished its set-up).

Why groups: in a wide fan-out a hundred runs start, reply and settle within a few milliseconds of each other, and
each of those calls paid a thread hop and a commit of its own (the commit writing the same `runs` and
`session_events` pages again). So when calls queue up, one worker-thread trip runs them, and the ones arriving
meanwhile, in order inside one transaction (for at most `GROUP_S`): each call's own transactions become savepoints of
it (a call that fails rolls back what it did, alone, exactly as before), and the group commits once. A caller's
result is handed back only after that commit, so nothing is acted upon before it is durable; a crash before the
commit loses the whole group, none of whose callers had been answered. A call alone in the queue runs as it always
did, outside any transaction of the lane's.

Who runs a group: the caller whose call is next in line, when no group is under way; when its own call is done it
hands the lane to the caller of the next waiting call. Waiting for one's own call, not for one's turn, matters: a
caller whose call ran in an earlier group returns at once. A call asked `first` (the pump's claims, a run's first
model request) goes ahead of those still waiting, so children claimed early start their model calls while later
siblings are still being spawned.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from mcp_harness.store import search

if TYPE_CHECKING:
    from mcp_harness.store.db import Database

T = TypeVar("T")

MAX_GROUP = 32
"""At most this many calls share a commit."""
GROUP_S = 0.01
"""A group takes no more calls once it has run this long: its first caller waits for the whole group, so this bounds
what grouping adds to a call's latency (a commit costs about a millisecond here)."""


class _HasDatabase(Protocol):
    @property
    def db(self) -> Database: ...


@dataclass(eq=False, slots=True)
class _Call:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    context: contextvars.Context
    taken: bool = False
    done: bool = False
    value: Any = None
    error: BaseException | None = None
    waiter: anyio.Event | None = None
    """Set when the call is done, or when its caller is handed the lane."""

    def wake(self) -> None:
        if self.waiter is not None:
            self.waiter.set()

    def run(self) -> None:
        try:
            self.value = self.context.run(self.fn, *self.args)
        except Exception as exc:  # handed to its caller, as a call on a thread of its own would raise it
            self.error = exc

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


@dataclass(eq=False, slots=True)
class _Queue:
    loop: object
    pending: deque[_Call] = field(default_factory=lambda: deque[_Call]())
    first: deque[_Call] = field(default_factory=lambda: deque[_Call]())
    """Calls asked `first`: taken before any of `pending`, in their own arrival order."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards both queues and `taken`: the worker thread takes calls that arrive while its group runs."""
    draining: bool = False
    """A caller is running a group (on the event loop's side, so no lock)."""

    def hand_over(self) -> None:
        """Wake the caller of the next waiting call, to run the next group."""
        with self.lock:
            line = self.first or self.pending
            call = line[0] if line else None
        if call is not None:
            call.wake()

    def take(self, group: list[_Call], started: float) -> _Call | None:
        """The next call for `group`, or None when the queue is empty or the group is full or out of time."""
        with self.lock:
            line = self.first or self.pending
            if not line or len(group) >= MAX_GROUP or (group and time.perf_counter() - started > GROUP_S):
                return None
            call = line.popleft()
            call.taken = True
            group.append(call)
            return call


class StoreLane:
    """Runs blocking store calls off the event loop, one at a time, first come first served (see the module)."""

    def __init__(self, store: _HasDatabase) -> None:
        self.store = store
        self._queue: _Queue | None = None

    async def call(self, fn: Callable[..., T], *args: Any, first: bool = False) -> T:
        """`fn(*args)` on the lane. `first` puts it ahead of the calls still waiting (not of a group under way)."""
        call = _Call(fn, args, contextvars.copy_context())
        queue = self._current()
        line = queue.first if first else queue.pending
        with queue.lock:
            line.append(call)
        try:
            # No group under way: this caller runs one (and more, until its own call is done), then hands the lane
            # to the caller of the next waiting call. Else it waits for its call's group, or for the hand-over.
            while not call.done:
                await anyio.lowlevel.checkpoint_if_cancelled()
                if queue.draining or call.taken:
                    call.waiter = anyio.Event()
                    await call.waiter.wait()
                    continue
                queue.draining = True
                try:
                    await self._run_group(queue)
                finally:
                    queue.draining = False
                    if call.done:
                        queue.hand_over()
        except anyio.get_cancelled_exc_class():
            with queue.lock:
                if not call.taken:
                    line.remove(call)  # never started: it does not run, as before
            if call.taken and not call.done:
                # Another caller's group holds it on the thread: like a call already on its own thread, it runs to
                # its end, and the cancellation is delivered after.
                with anyio.CancelScope(shield=True):
                    while not call.done:
                        call.waiter = anyio.Event()
                        await call.waiter.wait()
            if not queue.draining:
                queue.hand_over()  # this caller may have been the one handed the lane
            raise
        return call.result()

    def _current(self) -> _Queue:
        # One queue per event loop: an engine may outlive the loop it first ran in (tests, CLI commands). Every
        # store call of a run asks, so asyncio's own (C) lookup answers first; other backends ask anyio.
        try:
            loop: object = asyncio.get_running_loop()
        except RuntimeError:
            loop = anyio.lowlevel.current_token().native_token
        queue = self._queue
        if queue is None or queue.loop is not loop:
            queue = self._queue = _Queue(loop)
        return queue

    async def _run_group(self, queue: _Queue) -> None:
        group: list[_Call] = []
        try:
            # Shielded: a call is taken only on the thread, and a taken call runs even if this caller (or the caller
            # of any call in the group) is being cancelled.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._run, queue, group)
        finally:
            for call in group:
                call.done = True
                call.wake()

    def _run(self, queue: _Queue, group: list[_Call]) -> None:
        """On the worker thread: a lone call as it is; when more wait, they and what arrives while they run (up to
        `GROUP_S` or `MAX_GROUP`), in one transaction. Blocking."""
        started = time.perf_counter()
        with queue.lock:
            alone = len(queue.pending) + len(queue.first) < 2
        if alone:
            call = queue.take(group, started)
            if call is not None:
                call.run()
            return
        try:
            # The group's message index rows go into the search index together, just before the commit.
            with self.store.db.transaction() as conn, search.staged(conn):
                while (call := queue.take(group, started)) is not None:
                    call.run()
        except BaseException as exc:
            if not group:
                # The transaction could not even begin (a closed database, say): each call meets that on its own.
                if not isinstance(exc, Exception):
                    raise
                while (call := queue.take(group, started)) is not None:
                    call.run()
                return
            # The commit failed (or something broke out of a call): none of the group's work stands.
            for call in group:
                call.value, call.error = None, call.error or exc
            if not isinstance(exc, Exception):
                raise


__all__ = ["MAX_GROUP", "StoreLane"]
