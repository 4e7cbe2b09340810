"""Triggers at scale (issue 16, "How it is checked"): what one scheduler tick costs over many schedule triggers.

Why: the scheduler ticks every 5 s for as long as `serve` runs, whatever is connected; the reference decodes every
enabled schedule trigger and recomputes its due occurrence on each tick, which grows with the number of triggers.
Here a tick reads the indexed `next_due_at` column (`store/triggers.py`) and evaluates only the triggers whose time
has come (`triggers/scheduler.py`).

What, in a fresh data dir with 1,000 active schedule triggers (a third each interval, weekly in a timezone, and
once), on an injected clock:
- `tick, none due`: `Scheduler.tick()` when no occurrence is due (the steady state). Target: ≤ 20 ms per tick.
- `baseline`: in the same run, the reference's way — read every enabled schedule trigger, decode its source and
  compute its due occurrence — so the ratio says what the index buys on this machine.
- `tick, 10 due`: a tick that fires 10 of the 1,000 (each firing: its row, a session, the first message, a run).
- firing latency (event stored → run started), target p50 ≤ 50 ms: the activity monitor and the engine running as
  `serve` runs them, a document-comment trigger, comments by someone else stored one after another through the node
  (the monitor is woken by the node's notification, not its 5 s poll); each latency is the run's `started_at` minus
  the event's `observed_at`, both in ms.

Run: `.venv/bin/python bench/triggers.py [--triggers 1000] [--ticks 200] [--events 100]` (a few seconds); exits 1
when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.triggers.schedule import due_occurrence, next_due_at
from mcp_harness.triggers.scheduler import Scheduler

TICK_TARGET_MS = 20.0
LATENCY_TARGET_MS = 50.0
HOUR = 3_600_000
T0 = 1_704_096_000_000  # 2024-01-01 08:00 UTC, a Monday


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _source(i: int) -> dict[str, Any]:
    kind = i % 3
    if kind == 0:
        schedule: dict[str, Any] = {"kind": "interval", "every": 1 + i % 12, "unit": "hours"}
    elif kind == 1:
        schedule = {"kind": "weekly", "daysOfWeek": [i % 7], "timeOfDay": "09:30", "timezone": "Europe/Paris"}
    else:
        schedule = {"kind": "once", "runAt": T0 + 30 * 24 * HOUR + i}
    return {"type": "schedule", "schedule": schedule}


def _seed(h: Harness, count: int) -> list[str]:
    agent = h.agent()
    ids: list[str] = []
    with h.db.transaction():
        for i in range(count):
            source = _source(i)
            schedule = source["schedule"]
            saved = h.triggers.save(
                account_id=agent.account_id,
                agent_id=agent.id,
                name=f"bench-{i:04}",
                enabled=True,
                source=source,
                prompt="Benchmark trigger.",
                continuation=None,
                next_due=lambda c, last, s=schedule: next_due_at(s, created_at=c, last_fired_at=last),
                now=T0,
            )
            ids.append(saved.id)
    return ids


def _baseline(h: Harness, now: int) -> int:
    """The reference's tick: every enabled schedule trigger decoded and evaluated."""
    due = 0
    with h.db.reading() as conn:
        rows = conn.execute(
            "SELECT source_cbor, created_at, last_fired_at FROM triggers WHERE enabled = 1 AND source_type = 'schedule'"
        ).fetchall()
    for row in rows:
        schedule = cbor2.loads(row["source_cbor"])["schedule"]
        if due_occurrence(schedule, created_at=row["created_at"], last_fired_at=row["last_fired_at"], now=now):
            due += 1
    return due


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def curve_tick(count: int, ticks: int) -> bool:
    """Print the tick's cost over `count` schedule triggers against the decode-everything baseline."""
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(load_settings(data_dir=Path(tmp) / "data"))
        try:
            ids = _seed(h, count)
            clock = Clock(T0 + 10 * 60_000)  # ten minutes in: nothing is due
            scheduler = Scheduler(h, wake_engine=lambda: None, clock=clock)
            assert scheduler.tick() == ([], False) and _baseline(h, clock.now) == 0
            tick = statistics.median(_timed(scheduler.tick, ticks))
            base = statistics.median(_timed(lambda: _baseline(h, clock.now), ticks))
            # Ten interval triggers fall due: push their next_due_at into the past, as the hours passing would.
            with h.db.transaction() as conn:
                conn.executemany(
                    "UPDATE triggers SET created_at = ?, next_due_at = ? WHERE id = ?",
                    [(T0 - 24 * HOUR, T0 - 23 * HOUR, tid) for tid in ids[0:30:3]],
                )
            started = time.perf_counter()
            fired, _ = scheduler.tick()
            firing_tick = (time.perf_counter() - started) * 1000
            assert len(fired) == 10, fired
        finally:
            h.close()
    met = tick <= TICK_TARGET_MS
    print(
        f"  tick, none due ({count} triggers)  {tick:8.3f} ms  / target ≤ {TICK_TARGET_MS:g} ms "
        f"({tick / TICK_TARGET_MS:5.3f} of it): {'met' if met else 'MISSED'}"
    )
    print(f"  baseline (decode and evaluate all) {base:8.3f} ms  -> the tick costs {tick / base:6.4f}× the baseline")
    print(f"  tick, 10 due ({count} triggers)    {firing_tick:8.3f} ms  ({firing_tick / 10:.3f} ms per firing)")
    return met


def curve_firing_latency(events: int) -> bool:
    """Firing latency, event stored → run started (target p50 ≤ 50 ms): the activity monitor serving beside the
    engine (as `serve` runs them), a document-comment trigger, and `events` comments by someone else stored through
    the node one after another; each latency is the run's `started_at` minus the event's `observed_at`."""
    import json

    import anyio
    import anyio.to_thread

    from mcp_harness.definition import normalize_definition
    from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
    from mcp_harness.hypermedia.node import comment_body
    from mcp_harness.identity.identities import create_identity, load_keypair
    from mcp_harness.identity.keys import KeyPair
    from mcp_harness.triggers.sources import normalize_source

    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({"replies": ["done"]}))
        h = Harness(
            load_settings(
                data_dir=Path(tmp) / "data", providers={"scripted": {"type": "scripted", "file": str(script)}}
            )
        )
        latencies: list[int] = []
        try:
            alice = create_identity(h, "Alice")
            agent = h.agent()
            agent = h.agents.update(
                agent.id, normalize_definition({**agent.definition.to_json(), "signingKeys": [alice.name]})
            )
            node, key, bob = h.hypermedia, load_keypair(h, alice.name), KeyPair.generate()
            ops = metadata_operations({"name": "Post"}) + document_operations(parse_markdown("A post.").tree)
            node.publish(node.create(key, alice.account_id, "/post", ops))
            trigger = h.triggers.save(
                account_id=agent.account_id,
                agent_id=agent.id,
                name="comments",
                enabled=True,
                source=normalize_source({"type": "document-comment", "resource": f"hm://{alice.account_id}/post"}),
                prompt="Answer the comment.",
                continuation=None,
                next_due=lambda c, last: None,
            )
            body = comment_body(parse_markdown("A comment.").tree)

            def publish() -> None:
                node.publish([node.comment_blob(bob, node.document(alice.account_id, "/post"), body)])

            async def measure() -> None:
                async with h.engine_running():
                    for i in range(events):
                        await anyio.to_thread.run_sync(publish)
                        with anyio.fail_after(30):
                            while len(fired := h.triggers.firings_of(trigger.id)) <= i:
                                await anyio.sleep(0.001)
                        firing = fired[i]
                        run = await h.engine.wait_for(firing.run_id or "")
                        assert run.started_at is not None and firing.activity is not None
                        latencies.append(run.started_at - int(firing.activity["observedAt"]))

            anyio.run(measure)
        finally:
            h.close()
    p50 = statistics.median(latencies)
    p90 = statistics.quantiles(latencies, n=10)[-1]
    met = p50 <= LATENCY_TARGET_MS
    print(
        f"  firing latency (event stored → run started, {events} events)  p50 {p50:5.1f} ms, p90 {p90:5.1f} ms "
        f"/ target p50 ≤ {LATENCY_TARGET_MS:g} ms: {'met' if met else 'MISSED'}"
    )
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--events", type=int, default=100)
    args = parser.parse_args()
    print("triggers: scheduler tick")
    results = [curve_tick(args.triggers, args.ticks)]
    print("triggers: activity monitor")
    results.append(curve_firing_latency(args.events))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
