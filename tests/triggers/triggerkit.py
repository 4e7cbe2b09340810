"""What the trigger suites share: a settable clock, a trigger saved at a chosen time, and reads of what fired."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from mcp_harness.harness import Harness
from mcp_harness.store.triggers import FiringRecord, TriggerRecord
from mcp_harness.triggers.schedule import next_due_at
from mcp_harness.triggers.sources import normalize_source

MINUTE = 60_000
HOUR = 60 * MINUTE


@dataclass
class Clock:
    """An injected clock: epoch ms that moves only when a test moves it."""

    now: int

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def local_ms(zone: str, *parts: int, fold: int = 0) -> int:
    """Epoch ms of a wall-clock time in `zone` (year, month, day, hour, minute)."""
    return int(datetime(*parts, tzinfo=ZoneInfo(zone), fold=fold).timestamp() * 1000)  # pyright: ignore[reportArgumentType]


def save_trigger(
    harness: Harness,
    name: str,
    source: dict[str, Any],
    *,
    now: int,
    prompt: str = "Do the scheduled work.",
    continuation: dict[str, Any] | None = None,
    enabled: bool = True,
) -> TriggerRecord:
    """A trigger of the default agent created at `now` (the space stamps the real time; schedules need the clock's)."""
    agent = harness.agent()
    checked = normalize_source(source)
    schedule = checked.get("schedule")

    def next_due(created_at: int, last_fired_at: int | None) -> int | None:
        return None if schedule is None else next_due_at(schedule, created_at=created_at, last_fired_at=last_fired_at)

    return harness.triggers.save(
        account_id=agent.account_id,
        agent_id=agent.id,
        name=name,
        enabled=enabled,
        source=checked,
        prompt=prompt,
        continuation=continuation,
        next_due=next_due,
        now=now,
    )


def schedule(**fields: Any) -> dict[str, Any]:
    return {"type": "schedule", "schedule": fields}


def firings(harness: Harness, trigger: TriggerRecord) -> list[FiringRecord]:
    return harness.triggers.firings_of(trigger.id)


def scheduled_times(harness: Harness, trigger: TriggerRecord) -> list[int]:
    return [int(f.dedupe_key.rsplit(":", 1)[1]) for f in firings(harness, trigger)]
