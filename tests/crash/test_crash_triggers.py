"""Triggers survive `kill -9` (issue 16 point 2): a real `mcp-harness serve` is killed while its scheduler fires a
backlog of due triggers, restarted on the same data dir, killed again, and restarted; each occurrence fires exactly
once, with exactly one thread, one first message and one run.

The backlog: `once` triggers whose time has passed and interval triggers that missed several periods while the
server was "down" (their `created_at` is hours back), all due at the first scheduler pass. A firing is one
transaction (firing row, session, first message, run), so whatever moment the kill lands on, an occurrence is either
all there or not at all, and the next process fires what is missing — the dedupe key stops a second firing. Nothing
asserts on timing: wherever the kills land, the invariants must hold.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.triggers.schedule import next_due_at
from tests.crash.crashkit import memory_dir, query, runs, serving, until, write_config

pytestmark = pytest.mark.anyio

ONCE = 60
INTERVAL = 20
TOTAL = ONCE + INTERVAL
HOUR = 3_600_000


def seed(data_dir: Path, config: Path, total: int = TOTAL) -> None:
    """The backlog, written before any server runs."""
    harness = Harness(load_settings(config, data_dir=data_dir))
    try:
        agent = harness.agent()
        now = int(time.time() * 1000)
        for i in range(total):
            if i < ONCE:
                source: dict[str, Any] = {"type": "schedule", "schedule": {"kind": "once", "runAt": now - 1000 - i}}
                created = now - HOUR
            else:
                source = {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}}
                created = now - 5 * HOUR - i  # five periods missed: one firing
            schedule = source["schedule"]
            harness.triggers.save(
                account_id=agent.account_id,
                agent_id=agent.id,
                name=f"t{i:03}",
                enabled=True,
                source=source,
                prompt=f"Crash trigger {i}",
                continuation=None,
                next_due=lambda c, last, s=schedule: next_due_at(s, created_at=c, last_fired_at=last),
                now=created,
            )
    finally:
        harness.close()


def fired(db: Path) -> int:
    return int(query(db, "SELECT COUNT(*) FROM trigger_firings")[0][0])


async def test_each_occurrence_fires_exactly_once_across_kills(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    config = write_config(tmp_path, [{"turns": [{"text": "handled"}]}])
    config.write_text(config.read_text() + "\n[triggers]\npoll_interval_s = 0.05\n")
    seed(data_dir, config)
    db = data_dir / "harness.db"
    log_path = tmp_path / "serve.log"
    with log_path.open("ab") as log:
        for threshold in (1, TOTAL // 2):
            async with serving(data_dir, config, log) as server:
                await until(lambda t=threshold: fired(db) >= t, f"{threshold} firings", 60, log_path)
                await server.kill()
        async with serving(data_dir, config, log):
            await until(lambda: fired(db) == TOTAL, "every trigger fired", 60, log_path)
            await until(
                lambda: len(runs(db)) == TOTAL and all(r["status"] == "succeeded" for r in runs(db)),
                "every firing's run succeeded",
                120,
                log_path,
            )

    per_trigger = query(db, "SELECT trigger_id, COUNT(*) AS n FROM trigger_firings GROUP BY trigger_id")
    assert len(per_trigger) == TOTAL and {r["n"] for r in per_trigger} == {1}
    firings = query(db, "SELECT * FROM trigger_firings")
    assert {r["status"] for r in firings} == {"succeeded"}
    sessions = query(db, "SELECT id FROM sessions")
    assert sorted(r["id"] for r in sessions) == sorted(r["session_id"] for r in firings)  # no orphan, no twin
    first = query(
        db, "SELECT session_id, COUNT(*) AS n FROM session_events WHERE actor = 'trigger' GROUP BY session_id"
    )
    assert len(first) == TOTAL and {r["n"] for r in first} == {1}
    assert sorted(r["id"] for r in runs(db)) == sorted(f"firing-{r['id']}" for r in firings)
    once = query(db, "SELECT enabled, next_due_at FROM triggers WHERE name < ?", (f"t{ONCE:03}",))
    assert {(r["enabled"], r["next_due_at"]) for r in once} == {(0, None)}
    assert query(db, "PRAGMA integrity_check")[0][0] == "ok"


async def test_a_headless_http_server_fires_a_schedule_whose_run_writes_memory(tmp_path: Path) -> None:
    """`serve --http` with no client ever connecting: the scheduler runs beside the engine from the start."""
    rules = [
        {
            "when": "Crash trigger 0",
            "turns": [
                {"toolCalls": [{"name": "write", "input": {"address": "~/memory/headless.md", "content": "fired"}}]},
                {"text": "written"},
            ],
        }
    ]
    data_dir = tmp_path / "data"
    config = write_config(tmp_path, rules)
    config.write_text(config.read_text() + "\n[triggers]\npoll_interval_s = 0.05\n")
    seed(data_dir, config, total=1)
    db = data_dir / "harness.db"
    log_path = tmp_path / "serve.log"
    argv = [sys.executable, "-m", "mcp_harness", "serve", "--http", "127.0.0.1:0"]
    with log_path.open("ab") as log:
        proc = await anyio.open_process([*argv, "--data-dir", str(data_dir), "--config", str(config)], stderr=log)
        try:
            await until(lambda: [r["status"] for r in runs(db)] == ["succeeded"], "the firing's run", 60, log_path)
        finally:
            proc.terminate()
            with anyio.CancelScope(shield=True):
                await proc.wait()
                await proc.aclose()
    assert (memory_dir(data_dir) / "headless.md").read_text() == "fired"
    (firing,) = query(db, "SELECT status FROM trigger_firings")
    assert firing["status"] == "succeeded"
