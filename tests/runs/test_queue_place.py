"""Why a queued run waits (issue 15 point 6): `run:<id>` says it in its summary and as `queuePlace` — behind the
engine's limit on live runs, behind its session's live turn — and config.example.toml's `max_agent_runs` comment
promises that. Real SQLite; the engine does not serve, so queued runs stay queued."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mcp_harness.addresses import Address
from mcp_harness.config import RunSettings, load_settings
from mcp_harness.harness import Harness
from mcp_harness.scope import Scope
from mcp_harness.spaces import run as run_space
from mcp_harness.verbs.base import VerbContext, VerbResult

ROOT = Path(__file__).resolve().parents[2]


def _read(h: Harness, run_id: str, fmt: str = "markdown") -> VerbResult:
    agent = h.agent()
    ctx = VerbContext(services=h, agent=agent, session_id=None, actor="agent", scope=Scope(h.account_id))
    return run_space.read_run(ctx, Address("run", run_id, raw=f"run:{run_id}"), {}, fmt)


def _queued(h: Harness, session_id: str | None = None) -> str:
    agent = h.agent()
    if session_id is None:
        session_id = h.sessions.create(h.account_id, agent.id).id
    run_id = h.runs.enqueue(
        account_id=h.account_id, title="work", origin="agent", agent_id=agent.id, session_id=session_id
    ).id
    # Runs enqueued within one millisecond are claimed in id order: a distinct time each keeps creation order.
    with h.db.transaction() as conn:
        conn.execute(
            "UPDATE runs SET created_at = (SELECT COUNT(*) FROM runs) WHERE id = ?",
            (run_id,),
        )
    return run_id


def test_a_run_queued_behind_the_limit_says_how_many_are_ahead_and_the_limit(tmp_path: Path) -> None:
    h = Harness(load_settings(data_dir=tmp_path / "data", runs={"max_agent_runs": 1}))
    try:
        first, second, third = _queued(h), _queued(h), _queued(h)
        claimed = h.runs.claim_batch("elsewhere", {"agent": 1})
        assert [r.id for r in claimed] == [first]  # the oldest; the limit of one is now used up

        result = _read(h, third)
        assert result.data["summary"] == f"Run {third} (agent) is queued behind 2 runs; max_agent_runs = 1."
        assert result.data["queuePlace"] == {"reason": "limit", "live": 1, "ahead": 1, "limit": 1}
        assert result.text.startswith(result.data["summary"] + "\n\n- status: queued")
        assert "- waiting: queued behind 2 runs (1 live, 1 queued before it)" in result.text

        nearer = _read(h, second, fmt="json")
        assert nearer.data["summary"] == f"Run {second} (agent) is queued behind 1 run; max_agent_runs = 1."
        assert '"reason": "limit"' in nearer.text and nearer.text.lstrip().startswith("{")

        assert "queuePlace" not in _read(h, first).data  # running: nothing to explain
    finally:
        h.close()


def test_a_run_queued_behind_its_sessions_turn_says_so(tmp_path: Path) -> None:
    h = Harness(load_settings(data_dir=tmp_path / "data", runs={"max_agent_runs": 4}))
    try:
        turn = _queued(h)
        session = h.runs.get(turn).session_id
        assert [r.id for r in h.runs.claim_batch("elsewhere", {"agent": 4})] == [turn]
        follow_up = _queued(h, session)

        result = _read(h, follow_up)
        assert result.data["summary"] == (
            f"Run {follow_up} (agent) is queued behind its session's current turn (one turn at a time)."
        )
        assert result.data["queuePlace"]["reason"] == "session"
    finally:
        h.close()


def test_the_example_config_says_why_a_run_waits_and_keeps_the_default() -> None:
    text = (ROOT / "config.example.toml").read_text()
    section = text[text.index("[runs]") : text.index("\nmax_agent_runs =")]
    assert '`run:<id>` says why a run waits ("queued behind N runs; max_agent_runs = M")' in " ".join(
        line.lstrip("# ") for line in section.splitlines()
    )
    assert tomllib.loads(text)["runs"]["max_agent_runs"] == RunSettings().max_agent_runs == 16
