"""The CLI's own run queries (`cli/run_queries.py`: the session's runs and the scripts it started, a run's tree, the
cross-process cancel) and `sessions` / `log` / `runs` on both backends: on PostgreSQL through `[store] url` in
the config file, as a user points the command at a shared database."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from mcp_harness.cli import run_queries
from mcp_harness.store._util import now_ms
from tests.cli.clikit import run
from tests.store.harnesskit import BACKENDS, harness_on


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_queries_and_the_commands_over_them(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = harness_on(request, tmp_path, backend)
    try:
        agent = h.agent()
        session = h.sessions.create(h.account_id, agent.id, title="Planning")
        h.sessions.append(session.id, {"type": "message", "role": "user", "content": "hello"}, "user")
        enqueue = h.runs.enqueue
        root = enqueue(account_id=h.account_id, title="root", origin="user", agent_id=agent.id, session_id=session.id)
        child = enqueue(
            account_id=h.account_id, title="child", origin="agent", agent_id=agent.id, parent_run_id=root.id
        )
        grandchild = enqueue(account_id=h.account_id, title="g", origin="agent", parent_run_id=child.id)
        # Newest first is by the millisecond, and runs of one millisecond fall in id order, which is random: the
        # script is enqueued a tick later, so it is the newer whatever the box's speed.
        while now_ms() <= root.created_at:
            time.sleep(0.001)
        script = enqueue(
            account_id=h.account_id,
            kind="workflow",
            title="script",
            origin="agent",
            input={"parentSessionId": session.id},
        )
        enqueue(account_id=h.account_id, kind="workflow", title="elsewhere", origin="agent", input={"x": 1})
        assert run_queries.tree_ids(h, root.id) == [root.id, child.id, grandchild.id]
        assert [r.id for r in run_queries.list_runs(h, session_id=session.id)] == [script.id, root.id]
        assert [r.id for r in run_queries.script_runs_of(h, session.id)] == [script.id]
        assert len(run_queries.list_runs(h, statuses=["queued"], limit=3)) == 3
        assert not run_queries.session_idle(h, session.id)
        canceled = anyio.run(run_queries.cancel_tree, h, root.id)
        assert {r.id for r in canceled} == {root.id, child.id, grandchild.id}
        assert run_queries.list_runs(h, statuses=["canceled"], session_id=session.id)[0].id == root.id
        url = h.settings.store.url
    finally:
        h.close()
    config = tmp_path / "config.toml"
    config.write_text(f"[store]\nurl = {json.dumps(url)}\n" if url else "")
    flags = ("--config", str(config), "--data-dir", str(tmp_path / "data"))
    code, out, err = run(capsys, "sessions", *flags, "--json")
    assert code == 0 and [r["title"] for r in json.loads(out)] == ["Planning"], err
    code, out, err = run(capsys, "log", session.id, *flags, "--json")
    assert code == 0 and [e["type"] for e in json.loads(out)] == ["message"], err
    code, out, err = run(capsys, "runs", *flags, "--session", session.id, "--json")
    assert code == 0 and [r["id"] for r in json.loads(out)] == [script.id, root.id], err
    code, out, err = run(capsys, "runs", "cancel", script.id, *flags)
    assert code == 0 and "Canceled 1 run." in out, err
