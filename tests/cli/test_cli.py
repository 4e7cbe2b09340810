"""The `mcp-harness` command: agents, sessions and the event log, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_harness.config import EXAMPLE_CONFIG, load_settings
from mcp_harness.harness import Harness
from tests.cli.clikit import run


def test_agent_lifecycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path)
    code, _, err = run(capsys, "agent", "create", "researcher", "--data-dir", d, "--model-provider", "openai")
    assert code == 2 and "No model provider named 'openai'" in err, "a definition must name an existing provider"
    assert run(capsys, "provider", "add", "openai", "--type", "openai", "--data-dir", d)[0] == 0
    code, out, _ = run(
        capsys,
        "agent",
        "create",
        "researcher",
        "--data-dir",
        d,
        "--model-provider",
        "openai",
        "--model",
        "gpt-5.2",
        "--reasoning-level",
        "high",
        "--tools",
        "search,publish",
    )
    assert code == 0 and out.startswith("Created agent researcher (")
    code, out, _ = run(capsys, "agent", "list", "--data-dir", d, "--json")
    agents = json.loads(out)
    assert [a["definition"]["name"] for a in agents] == ["researcher"]
    assert agents[0]["definition"]["tools"] == ["search", "publish"]
    code, out, _ = run(capsys, "agent", "show", "researcher", "--data-dir", d)
    assert "reasoning level: high" in out and "sessions: 0" in out
    code, out, _ = run(capsys, "agent", "update", "researcher", "--data-dir", d, "--rename", "scout", "--tools", "")
    assert code == 0 and out == "Updated agent scout.\n"
    code, out, _ = run(capsys, "agent", "show", "scout", "--data-dir", d, "--json")
    assert json.loads(out)["definition"]["tools"] == []
    code, _, err = run(capsys, "agent", "update", "scout", "--data-dir", d, "--reasoning-level", "huge")
    assert code == 2 and "Reasoning level is invalid" in err
    code, _, err = run(capsys, "agent", "create", "scout", "--data-dir", d)
    assert code == 4 and "already exists" in err
    code, out, _ = run(capsys, "agent", "delete", "scout", "--data-dir", d)
    assert out == "Deleted agent scout.\n"
    code, _, err = run(capsys, "agent", "show", "scout", "--data-dir", d)
    assert code == 3 and "No agent named 'scout'" in err


def test_sessions_and_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h = Harness(load_settings(data_dir=tmp_path))
    agent = h.agent()
    s = h.sessions.create(h.account_id, agent.id, title="Planning")
    h.sessions.append(s.id, {"type": "message", "role": "user", "content": "hello"}, "user")
    h.sessions.append(s.id, {"type": "tool_call", "id": "c1", "name": "read", "input": {"address": "~/self"}}, "agent")
    h.sessions.append(
        s.id, {"type": "tool_result", "toolCallId": "c1", "name": "read", "output": {"summary": "You are x."}}, "agent"
    )
    h.close()
    code, out, _ = run(capsys, "sessions", "--data-dir", str(tmp_path))
    assert code == 0 and s.id in out and "Planning" in out and "assistant" in out
    code, out, _ = run(capsys, "log", s.id, "--data-dir", str(tmp_path))
    lines = out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["user", "agent", "agent"]
    assert lines[0].endswith("**user**: hello") and lines[2].endswith("← tool result read: You are x.")
    code, out, _ = run(capsys, "log", s.id, "--data-dir", str(tmp_path), "--json")
    assert [e["type"] for e in json.loads(out)] == ["message", "tool_call", "tool_result"], "one JSON array"
    code, out, _ = run(capsys, "sessions", "--data-dir", str(tmp_path), "--json")
    assert [r["title"] for r in json.loads(out)] == ["Planning"]
    code, _, err = run(capsys, "log", "nope", "--data-dir", str(tmp_path))
    assert code == 3 and "No thread nope" in err


def test_bad_config_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[agent]\nnmae = 'typo'\n", encoding="utf-8")
    code, _, err = run(capsys, "sessions", "--config", str(cfg), "--data-dir", str(tmp_path))
    assert code == 2 and "agent.nmae" in err and str(EXAMPLE_CONFIG) in err and EXAMPLE_CONFIG.is_file()


def test_the_packaged_example_config_is_the_documented_one_and_loads() -> None:
    root = Path(__file__).resolve().parents[2] / "config.example.toml"
    assert EXAMPLE_CONFIG.read_bytes() == root.read_bytes(), "edit config.example.toml, then copy it into mcp_harness/"
    settings = load_settings(EXAMPLE_CONFIG)
    assert settings.agent.name == "assistant" and settings.agent.model is None
