"""When a schedule is due (HARNESS §10 `dueOccurrence`, `schedule-triggers.ts:23-55`), on an injected clock.

Every rule counts from `after = last_fired_at ?? created_at`:
- interval: due at `after + every`. However many periods were missed, that is one occurrence, and after it fires
  `last_fired_at = max(now, scheduledAt)`, so the cadence follows the fire time.
- once: due at `runAt` until it has fired for that `runAt`; it is disabled when it fires.
- weekly: the latest local occurrence (a listed day at `timeOfDay` in the schedule's timezone) of the last 8 local
  days that is ≤ now, ≥ created_at and > after: a week of downtime is one firing.

Local times go through `zoneinfo` as wall-clock times: one that a spring-forward gap skips is shifted forward by the
gap (02:30 on a night that jumps 02:00 → 03:00 is 03:30), and one that a fall-back repeats is its first occurrence,
so each listed day has exactly one occurrence.

`next_due_at` is the earliest time an occurrence can be due, kept on the row so the scheduler's tick reads only the
triggers whose time has come.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

Clock = Callable[[], int]
"""Epoch milliseconds now (`store._util.now_ms` in production; tests pass their own)."""

UNIT_MS = {"minutes": 60_000, "hours": 3_600_000}
WEEKLY_WINDOW_DAYS = 8


def period_ms(schedule: dict[str, Any]) -> int:
    return int(schedule["every"]) * UNIT_MS[schedule["unit"]]


def _js_day(day: date) -> int:
    """0 = Sunday … 6 = Saturday, as `daysOfWeek` counts."""
    return (day.weekday() + 1) % 7


def _local_ms(day: date, hhmm: str, zone: ZoneInfo) -> int:
    hours, minutes = (int(part) for part in hhmm.split(":"))
    # fold=0: an ambiguous time is its first occurrence; a skipped one resolves with the offset before the gap,
    # which lands it after the gap by the gap's length.
    wall = datetime.combine(day, time(hours, minutes), tzinfo=zone)
    return int(wall.timestamp() * 1000)


def _weekly_occurrences(schedule: dict[str, Any], around_ms: int, days_back: int, days_ahead: int) -> list[int]:
    """Occurrences on the local days from `days_back` before to `days_ahead` after the local date of `around_ms`."""
    zone = ZoneInfo(schedule["timezone"])
    today = datetime.fromtimestamp(around_ms / 1000, UTC).astimezone(zone).date()
    wanted = set(schedule["daysOfWeek"])
    out: list[int] = []
    for offset in range(-days_back, days_ahead + 1):
        day = today + timedelta(days=offset)
        if _js_day(day) in wanted:
            out.append(_local_ms(day, schedule["timeOfDay"], zone))
    return sorted(out)


def _once_pending(run_at: int, last_fired_at: int | None) -> bool:
    # A firing leaves last_fired_at ≥ runAt; a runAt moved past it (an edited, re-enabled trigger) is pending again.
    return last_fired_at is None or last_fired_at < run_at


def due_occurrence(schedule: dict[str, Any], *, created_at: int, last_fired_at: int | None, now: int) -> int | None:
    """The `scheduledAt` of the occurrence due at `now`, or None when nothing is due."""
    after = last_fired_at if last_fired_at is not None else created_at
    kind = schedule["kind"]
    if kind == "interval":
        due = after + period_ms(schedule)
        return due if due <= now else None
    if kind == "once":
        run_at = int(schedule["runAt"])
        return run_at if _once_pending(run_at, last_fired_at) and run_at <= now else None
    candidates = _weekly_occurrences(schedule, now, WEEKLY_WINDOW_DAYS, 1)
    due = [t for t in candidates if after < t <= now and t >= created_at]
    return due[-1] if due else None


def next_due_at(schedule: dict[str, Any], *, created_at: int, last_fired_at: int | None) -> int | None:
    """The earliest time an occurrence can be due (None: never again)."""
    after = last_fired_at if last_fired_at is not None else created_at
    kind = schedule["kind"]
    if kind == "interval":
        return after + period_ms(schedule)
    if kind == "once":
        run_at = int(schedule["runAt"])
        return run_at if _once_pending(run_at, last_fired_at) else None
    # A listed day comes within a week; one day either side absorbs timezone offsets and DST shifts.
    candidates = _weekly_occurrences(schedule, after, 1, 8)
    later = [t for t in candidates if t > after and t >= created_at]
    return later[0] if later else None


def fired_at(scheduled_at: int, now: int) -> int:
    """What `last_fired_at` becomes after an occurrence fires."""
    return max(now, scheduled_at)


def describe(schedule: dict[str, Any], scheduled_at: int) -> str:
    """The occurrence as a firing's activity summary: its local time in the schedule's timezone."""
    zone_name = schedule.get("timezone")
    zone = ZoneInfo(zone_name) if zone_name else UTC
    local = datetime.fromtimestamp(scheduled_at / 1000, UTC).astimezone(zone)
    return f"scheduled for {local:%Y-%m-%d %H:%M} ({zone_name or 'UTC'})"


__all__ = ["Clock", "describe", "due_occurrence", "fired_at", "next_due_at", "period_ms"]
