"""The engine's store lane: short blocking store calls, one at a time in arrival order, committed in groups, on a
thread of the lane's own.

Why a lane: the store has one SQLite connection behind one lock, so running these calls side by side on many threads
gains nothing and made them slower (ten runs starting at once put ten threads in a convoy on that lock and the GIL,
and each of their first model requests went out only when the slowest had finished its set-up).

Why groups: in a wide fan-out a hundred runs start, reply and settle within a few milliseconds of each other, and
each of those calls paid a commit of its own (the commit writing the same `runs` and `session_events` pages again).
So when calls queue up, they, and the ones arriving meanwhile (for at most `GROUP_S`), run in order inside one
transaction: each call's own transactions become savepoints of it (a call that fails rolls back what it did, alone,
exactly as before), and the group commits once. A caller's result is handed back only after that commit, so nothing
is acted upon before it is durable; a crash before the commit loses the whole group, none of whose callers had been
answered. A call alone in the queue runs as it always did, outside any transaction of the lane's.

Why a thread of its own: the lane used to borrow a worker thread for each group, and the event loop then had to
hand the lane from one caller to the next; a fan-out's profile showed that hop (a worker-pool trip, an event per call,
a hand-over per group) costing the loop about a third of what the lane itself cost, and the lane idle while the loop
got round to it. Now a caller only queues its call and awaits a future; the lane's thread takes calls as they come,
and answers a whole group with one wake-up of the loop. It stops after `IDLE_S` without work and starts again on the
next call.

A call asked `first` (the pump's claims, a run's first model request) goes ahead of those still waiting, so children
claimed early start their model calls while later siblings are still being spawned. A cancelled caller whose call was
not taken yet removes it (it never runs); a call already taken runs to its end, and the cancellation is delivered
after, as for a call on a thread of its own.

A batch call (`call_batch`) names a function over a list of items: the calls of that function waiting in line when
the first of them is taken run as one call over all their items (up to `MAX_BATCH`), each caller getting its item's
result. Why: in a fan-out the ten leaves of a parent end together, and each paid the parent's side of its settle
(the parent's status, its answered calls, an append to its session, a roll-up of its usage) alone; as one batch
that is paid once per parent. If the batch raises, it is run again item by item, so a bad item fails alone: a batch
function must do all its writes in its own transaction (rolled back when it raises) and be safe to run again then.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import anyio.lowlevel

from mcp_harness.store import search

if TYPE_CHECKING:
    from mcp_harness.store.db import Database

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_GROUP = 32
"""At most this many calls share a commit."""
MAX_BATCH = 128
"""At most this many items in one run of a batch function: a fan-out's hundred leaves, claimed in one pass, start in
one batch and (when they end together) record their replies in one; at 64 each took two, and the second waited for
the loop to hand the first's results back."""
GROUP_S = 0.01
"""A group takes no more calls once it has run this long: its first caller waits for the whole group, so this bounds
what grouping adds to a call's latency (a commit costs about a millisecond here)."""
IDLE_S = 1.0
"""The lane's thread ends after this long without a call (an engine's lane must not outlive it by a thread)."""


class _HasDatabase(Protocol):
    @property
    def db(self) -> Database: ...


@dataclass(eq=False, slots=True)
class _Call:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    context: contextvars.Context
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    taken: bool = False
    """Set on the lane's thread (under the lane's lock) when the call is taken for a group."""
    done: bool = False
    """Set on the caller's loop once the call's group has committed (or failed)."""
    value: Any = None
    error: BaseException | None = None
    waiter: anyio.Event | None = None
    """A cancelled caller's wait for its taken call to finish."""
    batch: bool = False
    """`fn` takes a list of items (`args[0]` is this call's) and returns a list of their results (`call_batch`)."""
    peers: list[_Call] | None = None
    """A batch call's companions, taken with it: `fn` runs once over all their items (on this call's context)."""

    def run(self) -> None:
        if self.batch:
            self._run_batch()
            return
        try:
            self.value = self.context.run(self.fn, *self.args)
        except Exception as exc:  # handed to its caller, as a call on a thread of its own would raise it
            self.error = exc

    def _run_batch(self) -> None:
        calls = [self, *(self.peers or ())]
        try:
            values = self.context.run(self.fn, [c.args[0] for c in calls])
        except Exception as exc:
            if len(calls) == 1:
                self.error = exc
                return
            # The batch rolled back whole; item by item, only the bad one fails. Each on its own caller's context.
            for call in calls:
                try:
                    call.value = call.context.run(self.fn, [call.args[0]])[0]
                except Exception as one:
                    call.error = one
            return
        for call, value in zip(calls, values, strict=True):
            call.value = value

    def answer(self) -> None:
        """On the caller's loop: hand over the result (or error) and wake whoever waits."""
        self.done = True
        future = self.future
        if not future.done():
            if self.error is not None:
                future.set_exception(self.error)
            else:
                future.set_result(self.value)
        if self.waiter is not None:
            self.waiter.set()


_here = threading.local()
"""On a lane's thread: `(lane, serial)` of the call it runs now (`position`)."""


def position() -> tuple[StoreLane, int] | None:
    """Which lane runs the calling code and the serial number of its call there (each call taken counts one), or
    None off a lane. Two calls of one lane with consecutive serials ran back to back: nothing else of that lane
    (no claim, no spawn, no reply's write) ran between them."""
    return getattr(_here, "at", None)


def _answer_all(calls: list[_Call]) -> None:
    for call in calls:
        call.answer()


class StoreLane:
    """Runs blocking store calls off the event loop, one at a time, first come first served (see the module)."""

    def __init__(self, store: _HasDatabase) -> None:
        self.store = store
        self._pending: deque[_Call] = deque()
        self._first: deque[_Call] = deque()
        """Calls asked `first`: taken before any of `_pending`, in their own arrival order."""
        self._lock = threading.Lock()
        self._wanted = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._idle = False
        """The thread waits for work (so a new call must notify it)."""
        self._serial = 0
        """Calls taken so far (`position`)."""

    async def call(self, fn: Callable[..., T], *args: Any, first: bool = False) -> T:
        """`fn(*args)` on the lane. `first` puts it ahead of the calls still waiting (not of a group under way)."""
        return await self._queue(fn, args, first=first, batch=False)

    async def call_batch(self, fn: Callable[[list[Any]], list[T]], item: Any, *, first: bool = False) -> T:
        """`fn([item, …])[i]`: `item` run with whichever other items of `fn` wait in line when it is taken (see the
        module). `fn` must be one object for them all (a bound method compares equal to itself). `first` as for
        `call` (the batch forms among the calls asked `first`)."""
        return await self._queue(fn, (item,), first=first, batch=True)

    async def _queue(self, fn: Callable[..., Any], args: tuple[Any, ...], *, first: bool, batch: bool) -> Any:
        await anyio.lowlevel.checkpoint_if_cancelled()
        loop = asyncio.get_running_loop()
        call = _Call(fn, args, contextvars.copy_context(), loop, loop.create_future(), batch=batch)
        line = self._first if first else self._pending
        with self._lock:
            line.append(call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="store-lane", daemon=True)
                self._thread.start()
            elif self._idle:
                self._wanted.notify()
        try:
            return await call.future
        except asyncio.CancelledError:
            with self._lock:
                if not call.taken:
                    line.remove(call)  # never started: it does not run, as before
                    raise
            # The lane's thread holds it: like a call already on its own thread, it runs to its end, and the
            # cancellation is delivered after.
            with anyio.CancelScope(shield=True):
                while not call.done:
                    call.waiter = anyio.Event()
                    await call.waiter.wait()
            raise

    # -- the lane's thread -------------------------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._lock:
                if not (self._first or self._pending):
                    self._idle = True
                    self._wanted.wait(IDLE_S)
                    self._idle = False
                    if not (self._first or self._pending):
                        self._thread = None  # a later call starts another
                        return
            group: list[_Call] = []
            try:
                self._run(group)
            except BaseException as exc:  # not an Exception (those are the callers' own): each caller gets it
                logger.exception("The store lane failed")
                for call in group:
                    call.error = call.error or exc
            finally:
                self._hand_back(group)

    def _take(self, group: list[_Call], started: float) -> _Call | None:
        """The next call for `group`, or None when the queue is empty or the group is full or out of time."""
        with self._lock:
            line = self._first or self._pending
            if not line or len(group) >= MAX_GROUP or (group and time.perf_counter() - started > GROUP_S):
                return None
            call = line.popleft()
            call.taken = True
            group.append(call)
            if call.batch:
                call.peers = self._peers_of(call, line)
                group += call.peers
            self._serial += 1
            _here.at = (self, self._serial)  # the call runs next, on this thread
            return call

    @staticmethod
    def _peers_of(lead: _Call, line: deque[_Call]) -> list[_Call]:
        """The calls of `lead`'s batch function waiting in `line`, taken out of it (under the lock)."""
        peers = [c for c in line if c.batch and c.fn == lead.fn][: MAX_BATCH - 1]
        for peer in peers:
            line.remove(peer)
            peer.taken = True
        return peers

    def _run(self, group: list[_Call]) -> None:
        """A lone call as it is; when more wait, they and what arrives while they run (up to `GROUP_S` or
        `MAX_GROUP`), in one transaction. Blocking."""
        started = time.perf_counter()
        with self._lock:
            alone = len(self._pending) + len(self._first) < 2
        if alone:
            call = self._take(group, started)
            if call is not None:
                call.run()
            return
        try:
            # The group's message index rows go into the search index together, just before the commit.
            with self.store.db.transaction() as conn, search.staged(conn):
                while (call := self._take(group, started)) is not None:
                    call.run()
        except BaseException as exc:
            if not group:
                # The transaction could not even begin (a closed database, say): each call meets that on its own.
                if not isinstance(exc, Exception):
                    raise
                while (call := self._take(group, started)) is not None:
                    call.run()
                return
            # The commit failed (or something broke out of a call): none of the group's work stands.
            for call in group:
                call.value, call.error = None, call.error or exc
            if not isinstance(exc, Exception):
                raise

    @staticmethod
    def _hand_back(group: list[_Call]) -> None:
        """Answer the group's callers, one wake-up per event loop among them."""
        by_loop: dict[asyncio.AbstractEventLoop, list[_Call]] = {}
        for call in group:
            by_loop.setdefault(call.loop, []).append(call)
        for loop, calls in by_loop.items():
            try:
                loop.call_soon_threadsafe(_answer_all, calls)
            except RuntimeError:  # the loop is closed: nobody is left to answer
                pass


__all__ = ["MAX_BATCH", "MAX_GROUP", "StoreLane", "position"]
