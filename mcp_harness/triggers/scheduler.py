"""The scheduler: fires schedule triggers whose occurrence is due, beside the run engine (HARNESS §10 "Schedule").

A tick reads the ids of the triggers whose indexed `next_due_at` has come — nothing else, however many schedule
triggers exist — and evaluates each in a transaction of its own: re-read the row, compute the due occurrence, fire
it (`fire.py`) and move `last_fired_at` and `next_due_at` on, all or nothing. Two processes ticking at once (a
`serve` and a `chat` on one data dir) therefore cannot fire an occurrence twice: the second re-reads the row the
first committed, and the dedupe key would stop it anyway.

A `wake` continuation that finds no listener still consumes its occurrence (the firing says `no-listener`): the
reference stalls such an interval trigger on one occurrence key forever (HARNESS Appendix A, 12), which is not
copied. Time comes from an injected clock, so tests step through schedules without sleeping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus

from mcp_harness.store._util import now_ms
from mcp_harness.triggers.fire import FireHost, fire
from mcp_harness.triggers.schedule import Clock, describe, due_occurrence, fired_at, next_due_at

if TYPE_CHECKING:
    from mcp_harness.store.triggers import FiringRecord, TriggerRecord

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 5.0
"""How often the scheduler looks (HARNESS §10: every 5 s by default; `[triggers] poll_interval_s`)."""
BATCH = 100
"""Due triggers evaluated per pass; a fuller backlog is worked through in further passes at once."""


def schedule_activity(trigger: TriggerRecord, scheduled_at: int, now: int) -> dict[str, Any]:
    """A schedule firing's activity `{type, scheduleKind, scheduledAt, firedAt, timezone?}`."""
    schedule = trigger.source["schedule"]
    activity: dict[str, Any] = {
        "type": "schedule",
        "scheduleKind": schedule["kind"],
        "scheduledAt": scheduled_at,
        "firedAt": now,
    }
    if schedule.get("timezone"):
        activity["timezone"] = schedule["timezone"]
    return activity


class Scheduler:
    """Evaluates due schedule triggers every `poll_interval_s` while `serve` runs."""

    def __init__(
        self,
        host: FireHost,
        *,
        wake_engine: Callable[[], None],
        clock: Clock = now_ms,
        poll_interval_s: float = POLL_INTERVAL_S,
        batch: int = BATCH,
    ) -> None:
        self.host = host
        self.wake_engine = wake_engine
        self.clock = clock
        self.poll_interval_s = poll_interval_s
        self.batch = batch

    def tick(self) -> tuple[list[FiringRecord], bool]:
        """One pass: the firings it made, and whether more triggers may be due (a full batch). Blocking."""
        now = self.clock()
        due = self.host.triggers.due(now, self.batch)
        fired: list[FiringRecord] = []
        for trigger_id in due:
            try:
                record = self.evaluate(trigger_id, now)
            except Exception as exc:  # one broken trigger must not stop the others; it is retried next pass
                logger.exception("Evaluating schedule trigger %s failed", trigger_id)
                self.host.triggers.set_error(trigger_id, f"The scheduler could not fire it: {exc}")
                continue
            if record is not None:
                fired.append(record)
        return fired, len(due) >= self.batch

    def evaluate(self, trigger_id: str, now: int) -> FiringRecord | None:
        """Fire the trigger's due occurrence, if it has one, and move its schedule on: one transaction. Blocking."""
        store = self.host.triggers
        with self.host.db.transaction():
            trigger = store.get(trigger_id)
            if trigger is None:
                return None
            if not trigger.enabled or trigger.source_type != "schedule":
                store.advance(trigger_id, fired_at=None, next_due_at=None)
                return None
            schedule = trigger.source["schedule"]
            scheduled = due_occurrence(
                schedule, created_at=trigger.created_at, last_fired_at=trigger.last_fired_at, now=now
            )
            if scheduled is None:
                later = next_due_at(schedule, created_at=trigger.created_at, last_fired_at=trigger.last_fired_at)
                store.advance(trigger_id, fired_at=None, next_due_at=later)
                return None
            record = fire(
                self.host,
                trigger=trigger,
                dedupe_key=f"schedule:{trigger.id}:{scheduled}",
                activity=schedule_activity(trigger, scheduled, now),
                summary=describe(schedule, scheduled),
                now=now,
            )
            last = fired_at(scheduled, now)
            once = schedule["kind"] == "once"
            following = None if once else next_due_at(schedule, created_at=trigger.created_at, last_fired_at=last)
            store.advance(trigger_id, fired_at=last, next_due_at=following, disable=once)
        return record

    async def run_once(self) -> list[FiringRecord]:
        """Passes until no due trigger is left; wakes the engine for what fired."""
        fired: list[FiringRecord] = []
        while True:
            batch, more = await anyio.to_thread.run_sync(self.tick)
            fired += batch
            if batch:
                self.wake_engine()
            if not more:
                return fired

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Tick until cancelled. Start it with `tg.start`, after the engine's boot sweep."""
        task_status.started()
        while True:
            try:
                await self.run_once()
                delay = await anyio.to_thread.run_sync(self._delay)
            except Exception:  # the scheduler outlives a failed pass (a locked database, a full disk)
                logger.exception("A scheduler pass failed; trying again shortly")
                delay = self.poll_interval_s
            await anyio.sleep(delay)

    def _delay(self) -> float:
        """Until the next due time, at most the poll interval. A time already past after a full pass is a trigger
        whose evaluation failed: it is retried at the poll interval, not in a busy loop."""
        soonest = self.host.triggers.next_due()
        wait_ms = None if soonest is None else soonest - self.clock()
        if wait_ms is None or wait_ms <= 0:
            return self.poll_interval_s
        return min(self.poll_interval_s, wait_ms / 1000)


__all__ = ["BATCH", "POLL_INTERVAL_S", "Scheduler", "schedule_activity"]
