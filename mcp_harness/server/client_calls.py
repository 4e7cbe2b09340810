"""A 2026-07-28 client's open `delegate` call (`mrtr.py` runs its rounds), the turns under it that wait on the
client's model, and how a turn finds the call it works under.

A client's `delegate` logs its call with an id that becomes its child run's `parentToolCallId`; every run below
shares that child's `root_run_id`. A turn reaches the call by walking up from its run through awaited links only: a
detached child (`await: false`) outlives any call, so neither it nor anything it starts may use one.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import mcp_types as types

from mcp_harness.store._util import new_id

if TYPE_CHECKING:
    from mcp_harness.errors import HarnessError
    from mcp_harness.harness import Harness
    from mcp_harness.verbs.base import Progress, VerbResult

logger = logging.getLogger(__name__)

VerbOutcome = tuple["VerbResult | None", "HarnessError | None"]
Answer = types.CreateMessageResult | types.CreateMessageResultWithTools
_MEMO = 4096


@dataclass(eq=False)
class _Pending:
    """A turn's model request, waiting for its answer (`sent`: in a round the client has not answered yet)."""

    run_id: str
    request: types.CreateMessageRequest
    sent: bool = False
    answer: Answer | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)


@dataclass(eq=False)
class ClientCall:
    """One client `delegate` call of the 2026-07-28 era, across its rounds. Its id is the logged tool call id, so
    its child run's `parentToolCallId`: that is how a sampling turn finds the call its tree belongs to."""

    owner: tuple[str | None, str | None]
    """(token hash, harness session): only the caller that opened the call may answer for it."""
    can_sample: bool
    id: str = field(default_factory=new_id)
    root_run_id: str | None = None
    pending: dict[str, _Pending] = field(default_factory=lambda: {})
    outcome: VerbOutcome | None = None
    finished: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    report: Progress | None = None
    """The open round's progress reporter: the child's status goes to whichever round is open, none between."""
    round: int = 0
    ended_at: float | None = None

    def notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def forward(self, message: str) -> None:
        report = self.report
        if report is None:
            return
        try:
            await report(message)
        except Exception:  # a round that ends while its status is on the way must not fail the delegate
            logger.debug("progress for a closed round dropped", exc_info=True)

    async def ask(self, run_id: str, request: types.CreateMessageRequest) -> Answer:
        """Wait for the client's answer to `request`, carried by this call's next round. The caller bounds the wait
        (`SamplingClient`); however it ends, the request stops waiting, so a late answer is dropped."""
        key = secrets.token_urlsafe(9)
        pending = self.pending[key] = _Pending(run_id, request)
        self.notify()
        try:
            await pending.answered.wait()
            assert pending.answer is not None
            return pending.answer
        finally:
            self.pending.pop(key, None)


class CallTrees:
    """Tree lookups over the run store, for one harness."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self._roots: OrderedDict[str, tuple[str, str]] = OrderedDict()
        """run id → (root run id, kind): fixed for a run's life, so asked once."""

    def of_session(self, session_id: str) -> tuple[str, str, str] | None:
        """(run, root run, the client call id the root answers) for the run now live on the session. Blocking."""
        runs = self.harness.runs
        run_id = self.harness.sessions.live_run(session_id)
        if run_id is None:
            return None
        run = runs.get(run_id)
        while run.parent_run_id is not None:
            parent = runs.get(run.parent_run_id)
            if run.parent_tool_call_id is None and parent.kind != "workflow":  # a script's model children are awaited
                return None
            run = parent
        call_id = run.parent_tool_call_id
        return (run_id, run.id, call_id) if call_id is not None else None

    async def all_waiting(self, root_run_id: str | None, waiting: set[str]) -> bool:
        """Whether every agent run of the tree executing in this process is among `waiting` (on a model reply)."""
        engine = self.harness.engine
        running = engine.running_ids()
        unknown = [r for r in running if r not in self._roots]
        if unknown:
            await engine.offload(self._learn, unknown)
        for run_id in running:
            root, kind = self._roots.get(run_id, ("", ""))
            if root == root_run_id and kind == "agent" and run_id not in waiting:
                return False
        return True

    def _learn(self, run_ids: list[str]) -> None:
        for run_id in run_ids:
            run = self.harness.runs.find(run_id)
            if run is not None:
                self._roots[run_id] = (run.root_run_id, run.kind)
        while len(self._roots) > _MEMO:
            self._roots.popitem(last=False)
