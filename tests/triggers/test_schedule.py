"""Schedules on an injected clock (HARNESS §10): every kind, timezones, both DST edges, missed periods collapsing into
one firing, `once` disabled after it fires — first as the pure rules, then through the scheduler's tick over a real
database (no engine: the runs a firing queues just wait)."""

from __future__ import annotations

from mcp_harness.harness import Harness
from mcp_harness.triggers.schedule import due_occurrence, next_due_at
from mcp_harness.triggers.scheduler import Scheduler
from tests.triggers.triggerkit import HOUR, MINUTE, Clock, firings, local_ms, save_trigger, schedule, scheduled_times

T0 = local_ms("UTC", 2024, 1, 1, 8, 0)  # a Monday


def scheduler(harness: Harness, clock: Clock) -> Scheduler:
    return Scheduler(harness, wake_engine=lambda: None, clock=clock)


# -- the rules -------------------------------------------------------------------------------------------------------


def test_an_interval_is_due_one_period_after_creation_and_missed_periods_are_one_occurrence() -> None:
    every = {"kind": "interval", "every": 30, "unit": "minutes"}
    assert due_occurrence(every, created_at=T0, last_fired_at=None, now=T0 + 29 * MINUTE) is None
    assert due_occurrence(every, created_at=T0, last_fired_at=None, now=T0 + 30 * MINUTE) == T0 + 30 * MINUTE
    # Down for five hours: ten periods missed, one occurrence, at the first of them.
    assert due_occurrence(every, created_at=T0, last_fired_at=None, now=T0 + 5 * HOUR) == T0 + 30 * MINUTE
    # The cadence then follows the fire time.
    assert next_due_at(every, created_at=T0, last_fired_at=T0 + 5 * HOUR) == T0 + 5 * HOUR + 30 * MINUTE
    hours = {"kind": "interval", "every": 2, "unit": "hours"}
    assert due_occurrence(hours, created_at=T0, last_fired_at=T0 + HOUR, now=T0 + 3 * HOUR) == T0 + 3 * HOUR


def test_once_is_due_at_run_at_until_it_fired_and_again_only_for_a_later_run_at() -> None:
    once = {"kind": "once", "runAt": T0 + HOUR}
    assert due_occurrence(once, created_at=T0, last_fired_at=None, now=T0 + HOUR - 1) is None
    assert due_occurrence(once, created_at=T0, last_fired_at=None, now=T0 + 9 * HOUR) == T0 + HOUR
    assert due_occurrence(once, created_at=T0, last_fired_at=T0 + 9 * HOUR, now=T0 + 10 * HOUR) is None
    assert next_due_at(once, created_at=T0, last_fired_at=T0 + 9 * HOUR) is None
    moved = {"kind": "once", "runAt": T0 + 20 * HOUR}  # an edited trigger given a new time
    assert next_due_at(moved, created_at=T0, last_fired_at=T0 + 9 * HOUR) == T0 + 20 * HOUR
    past = {"kind": "once", "runAt": T0 - HOUR}  # already past when written: fires at the first look
    assert due_occurrence(past, created_at=T0, last_fired_at=None, now=T0) == T0 - HOUR


def test_weekly_fires_at_the_local_time_of_its_timezone() -> None:
    paris = {"kind": "weekly", "daysOfWeek": [1], "timeOfDay": "09:00", "timezone": "Europe/Paris"}
    tokyo = {**paris, "timezone": "Asia/Tokyo"}
    monday_paris = local_ms("Europe/Paris", 2024, 1, 8, 9, 0)
    monday_tokyo = local_ms("Asia/Tokyo", 2024, 1, 8, 9, 0)
    assert monday_tokyo == monday_paris - 8 * HOUR
    assert next_due_at(paris, created_at=T0 + HOUR, last_fired_at=None) == monday_paris
    assert next_due_at(tokyo, created_at=T0 + HOUR, last_fired_at=None) == monday_tokyo
    assert due_occurrence(paris, created_at=T0 + HOUR, last_fired_at=None, now=monday_paris - 1) is None
    assert due_occurrence(paris, created_at=T0 + HOUR, last_fired_at=None, now=monday_paris + 5) == monday_paris


def test_weekly_counts_days_from_sunday_and_collapses_a_missed_fortnight_into_the_latest_occurrence() -> None:
    weekend = {"kind": "weekly", "daysOfWeek": [0, 6], "timeOfDay": "7:05", "timezone": "UTC"}
    saturday = local_ms("UTC", 2024, 1, 6, 7, 5)
    assert next_due_at(weekend, created_at=T0 + HOUR, last_fired_at=None) == saturday  # created on a Monday
    two_weeks_later = local_ms("UTC", 2024, 1, 21, 12, 0)  # a Sunday afternoon
    due = due_occurrence(weekend, created_at=saturday - HOUR, last_fired_at=saturday, now=two_weeks_later)
    assert due == local_ms("UTC", 2024, 1, 21, 7, 5)
    # Never before the trigger existed: created after this morning's time, nothing is due until the next one.
    assert due_occurrence(weekend, created_at=two_weeks_later - HOUR, last_fired_at=None, now=two_weeks_later) is None


def test_a_time_the_spring_forward_gap_skips_fires_once_shifted_past_the_gap() -> None:
    daily = {"kind": "weekly", "daysOfWeek": list(range(7)), "timeOfDay": "02:30", "timezone": "America/New_York"}
    saturday = local_ms("America/New_York", 2024, 3, 9, 2, 30)  # EST, UTC-5
    # 2024-03-10 02:00 EST jumps to 03:00 EDT: 02:30 does not exist that night; it fires at 03:30 EDT (07:30 UTC).
    gap_day = local_ms("UTC", 2024, 3, 10, 7, 30)
    assert next_due_at(daily, created_at=saturday - HOUR, last_fired_at=saturday) == gap_day
    assert due_occurrence(daily, created_at=saturday - HOUR, last_fired_at=saturday, now=gap_day + MINUTE) == gap_day
    # The day after is a normal 02:30 EDT (06:30 UTC): 23 hours later, not 24.
    monday = next_due_at(daily, created_at=saturday - HOUR, last_fired_at=gap_day)
    assert monday == local_ms("UTC", 2024, 3, 11, 6, 30) == gap_day + 23 * HOUR


def test_a_time_the_fall_back_repeats_fires_once_at_its_first_occurrence() -> None:
    daily = {"kind": "weekly", "daysOfWeek": list(range(7)), "timeOfDay": "01:30", "timezone": "America/New_York"}
    first = local_ms("America/New_York", 2024, 11, 3, 1, 30, fold=0)  # EDT, 05:30 UTC
    second = local_ms("America/New_York", 2024, 11, 3, 1, 30, fold=1)  # EST, 06:30 UTC
    assert second - first == HOUR
    created = first - 6 * HOUR
    assert due_occurrence(daily, created_at=created, last_fired_at=None, now=first) == first
    # An hour later the wall clock reads 01:30 again: already fired, nothing is due.
    assert due_occurrence(daily, created_at=created, last_fired_at=first, now=second + MINUTE) is None
    assert next_due_at(daily, created_at=created, last_fired_at=first) == local_ms(
        "America/New_York", 2024, 11, 4, 1, 30
    )


# -- the scheduler's tick --------------------------------------------------------------------------------------------


def test_a_tick_fires_nothing_early_and_a_missed_stretch_fires_once(harness: Harness) -> None:
    clock = Clock(T0)
    trigger = save_trigger(harness, "half-hourly", schedule(kind="interval", every=30, unit="minutes"), now=T0)
    sched = scheduler(harness, clock)
    clock.advance(29 * MINUTE)
    assert sched.tick() == ([], False) and firings(harness, trigger) == []
    clock.advance(3 * HOUR)  # the server was "down" through six periods
    fired, more = sched.tick()
    assert not more and [f.trigger_id for f in fired] == [trigger.id]
    assert scheduled_times(harness, trigger) == [T0 + 30 * MINUTE]
    assert sched.tick() == ([], False)  # the same moment again: nothing more
    after = harness.triggers.get(trigger.id)
    assert after is not None and after.last_fired_at == clock.now and after.next_due_at == clock.now + 30 * MINUTE
    clock.advance(30 * MINUTE)
    sched.tick()
    assert scheduled_times(harness, trigger) == [T0 + 30 * MINUTE, T0 + 3 * HOUR + 59 * MINUTE]


def test_once_fires_once_and_is_disabled(harness: Harness) -> None:
    clock = Clock(T0)
    trigger = save_trigger(harness, "reminder", schedule(kind="once", runAt=T0 + HOUR, timezone="Europe/Paris"), now=T0)
    sched = scheduler(harness, clock)
    clock.advance(2 * HOUR)
    (firing,) = sched.tick()[0]
    assert firing.activity == {
        "type": "schedule",
        "scheduleKind": "once",
        "scheduledAt": T0 + HOUR,
        "firedAt": T0 + 2 * HOUR,
        "timezone": "Europe/Paris",
    }
    assert firing.summary == "scheduled for 2024-01-01 10:00 (Europe/Paris)"
    after = harness.triggers.get(trigger.id)
    assert after is not None and not after.enabled and after.next_due_at is None
    clock.advance(24 * HOUR)
    assert sched.tick() == ([], False) and len(firings(harness, trigger)) == 1


def test_two_schedulers_on_one_database_fire_an_occurrence_once(harness: Harness) -> None:
    clock = Clock(T0)
    trigger = save_trigger(harness, "hourly", schedule(kind="interval", every=1, unit="hours"), now=T0)
    first, second = scheduler(harness, clock), scheduler(harness, clock)
    clock.advance(HOUR)
    due = harness.triggers.due(clock.now, 10)
    assert due == [trigger.id]
    assert first.evaluate(trigger.id, clock.now) is not None
    assert second.evaluate(trigger.id, clock.now) is None  # it re-reads the row the first committed
    assert len(firings(harness, trigger)) == 1


def test_a_disabled_or_deleted_trigger_is_not_fired(harness: Harness) -> None:
    clock = Clock(T0)
    off = save_trigger(harness, "off", schedule(kind="interval", every=1, unit="hours"), now=T0, enabled=False)
    gone = save_trigger(harness, "gone", schedule(kind="interval", every=1, unit="hours"), now=T0)
    harness.triggers.delete(gone.id)
    clock.advance(5 * HOUR)
    assert scheduler(harness, clock).tick() == ([], False)
    assert off.next_due_at is None and firings(harness, off) == []


def test_a_backlog_larger_than_a_batch_is_worked_through_in_passes(harness: Harness) -> None:
    clock = Clock(T0)
    made = [save_trigger(harness, f"t{i}", schedule(kind="once", runAt=T0), now=T0) for i in range(5)]
    sched = Scheduler(harness, wake_engine=lambda: None, clock=clock, batch=2)
    passes = [sched.tick() for _ in range(3)]
    assert [(len(f), more) for f, more in passes] == [(2, True), (2, True), (1, False)]
    assert all(len(firings(harness, t)) == 1 for t in made)
