"""What becomes of a run's outcome in `RunEngine`: its terminal commit and the effects that commit carries.

An outcome is committed in one transaction with what must land with the terminal state: the terminal hooks
(run-completed triggers) and the executor's `settled` (a child's result reaching its parent). Runs ending together,
as a fan-out's leaves replying in one lane batch do, settle in one read and one write of their rows
(`RunStore.settle_many_within`) with the hooks called once for all of them; a run settled alone takes the same path
with one item. The pump, the lane and the executions are `engine.py`'s.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from mcp_harness.runs.outcomes import Canceled, Outcome
from mcp_harness.store import run_leases

if TYPE_CHECKING:
    from mcp_harness.runs.engine import Executor
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.store.run_settle import Settlement
    from mcp_harness.store.runs import RunStore

logger = logging.getLogger(__name__)


@dataclass(eq=False, slots=True)
class Slot:
    """A run executing in this engine."""

    kind: str
    scope: anyio.CancelScope
    settled: tuple[RunRecord, bool] | None = None
    """Set (once committed) when the executor committed its outcome itself with `settle_now`."""


class EngineSettle:
    """The settle side of `RunEngine` (which supplies the store, the executors, the hooks and what executes)."""

    store: RunStore
    executors: dict[str, Executor]
    on_terminal: list[Callable[[Sequence[RunRecord]], None]]
    owner: str
    retry_base_ms: int
    retry_cap_ms: int
    _running: dict[str, Slot]

    def _settle(
        self, run_id: str, outcome: Outcome, usage: Mapping[str, Any] | None = None, owner: str | None = None
    ) -> tuple[RunRecord, bool]:
        """Commit an outcome (and `usage`, see `RunStore.settle`), with the executor's terminal effects in the same
        transaction. `owner`: an execution's own outcome, dropped if the lease is no longer ours. Blocking."""
        with self.store.db.transaction() as conn:
            return self._settle_in(conn, [(run_id, outcome, usage)], owner)[0]

    def _settle_in(
        self, conn: sqlite3.Connection, items: Sequence[Settlement], owner: str | None
    ) -> list[tuple[RunRecord, bool]]:
        """`_settle` of several runs in the caller's open transaction, without a savepoint of its own (rows read and
        written in one statement each, `RunStore.settle_many_within`); the terminal hooks called once with all the
        runs it ended."""
        settled = self.store.settle_many_within(
            conn, items, retry_base_ms=self.retry_base_ms, retry_cap_ms=self.retry_cap_ms, owner=owner
        )
        ended = [record for record, done in settled if done]
        if ended:
            self._terminal_effects(ended)
        return settled

    def _terminal_effects(self, records: Sequence[RunRecord]) -> None:
        with run_leases.released():  # the effects write to the runs just ended (their plan, say): no lease to check
            self._terminal_effects_of(records)

    def _terminal_effects_of(self, records: Sequence[RunRecord]) -> None:
        for hook in self.on_terminal:
            try:
                hook(records)  # its writes under savepoints of its own (see `on_terminal`)
            except Exception:  # the terminal commits stand without what this hook would have added
                logger.exception("A terminal hook failed for run %s", ", ".join(r.id for r in records))
        for record in records:
            executor = self.executors.get(record.kind)
            settled = getattr(executor, "settled", None)
            if settled is None:
                continue
            try:
                if getattr(executor, "settles_atomically", False):
                    settled(record)
                else:
                    with self.store.db.transaction():
                        settled(record)
            except Exception:  # the terminal commit stands; the boot reconciliation redoes what was lost
                logger.exception("The terminal effects of run %s failed", record.id)

    def applies_terminal_effects(self, kind: str) -> bool:
        """Whether terminal commits of `kind` runs carry their executor's effects (see `Executor`)."""
        return getattr(self.executors.get(kind), "settled", None) is not None

    def settle_now(self, run_id: str, outcome: Outcome, *, usage: Mapping[str, Any] | None = None) -> RunRecord | None:
        """For a run's executor, inside one of its own `offload` calls: commit the run's outcome now, in the
        caller's transaction, so the run's last write and its terminal commit are one commit (and one trip).
        `usage` (its last reply's tokens) is added in the same write, even when the outcome is discarded.
        Once that commits, the engine records nothing more for this execution, whatever the executor then returns;
        the hooks fire as usual. A cancel already requested makes it `Canceled`, as it would have been at the end.
        None (nothing done) when the run is not executing in this engine. Blocking.
        """
        return self.settle_now_many([(run_id, outcome, usage)])[0]

    def settle_now_many(self, items: Sequence[Settlement]) -> list[RunRecord | None]:
        """`settle_now` of several runs ending together (a fan-out's leaves replying in one batch): their rows read
        and written in one statement each, the terminal hooks called once with all of them."""
        slots = [self._running.get(run_id) for run_id, _, _ in items]
        chosen = [
            (run_id, Canceled() if slot.scope.cancel_called else outcome, usage)
            for (run_id, outcome, usage), slot in zip(items, slots, strict=True)
            if slot is not None
        ]
        if not chosen:
            return [None] * len(items)
        with self.store.db.reading() as conn:
            # In the caller's transaction no savepoint of its own: a failure here fails the caller's whole write.
            if conn.in_transaction:
                settled = self._settle_in(conn, chosen, self.owner)
            else:
                with self.store.db.transaction() as own:
                    settled = self._settle_in(own, chosen, self.owner)
        live = [slot for slot in slots if slot is not None]

        def committed() -> None:
            for slot, pair in zip(live, settled, strict=True):
                slot.settled = pair

        self.store.db.after_commit(committed)
        answers = iter(record for record, _ in settled)
        return [None if slot is None else next(answers) for slot in slots]


__all__ = ["EngineSettle", "Slot"]
