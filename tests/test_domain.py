"""Domain rules without the protocol: addresses, plan normalization, definitions, migrations, event sequences."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.addresses import parse_address
from mcp_harness.definition import normalize_definition
from mcp_harness.errors import BadRequest, Conflict, StorageError
from mcp_harness.harness import Harness
from mcp_harness.store.db import Database
from mcp_harness.verbs.plan import normalize_plan, settle

BASE = {"name": "a", "systemPrompt": "p", "modelProvider": "openai", "model": "gpt-5.2"}


@pytest.mark.parametrize(
    ("text", "kind", "rest", "listing"),
    [
        ("~/memory", "memory", "", True),
        ("~/memory/", "memory", "", True),
        ("~/memory/a/b.md", "memory", "a/b.md", False),
        ("~/memory/a/", "memory", "a/", True),
        ("harness://memory/a%20b.md", "memory", "a b.md", False),
        ("~/self/", "self", "", False),
        ("~/tools", "tools", "", True),
        ("harness://tools/read", "tools", "read", False),
        ("thread:", "thread", "", True),
        ("thread: abc ", "thread", "abc", False),
        ("harness://plan", "plan", "", False),
        ("HM://x/y", "hm", "HM://x/y", False),
    ],
)
def test_addresses_parse_by_shape(text: str, kind: str, rest: str, listing: bool) -> None:
    address = parse_address(text)
    assert address is not None
    assert (address.kind, address.rest, address.listing) == (kind, rest, listing)


@pytest.mark.parametrize("text", ["~/memoryx", "~/other/x", "/etc/passwd", "file:///etc/passwd", "memory/a"])
def test_unknown_address_shapes_parse_to_none(text: str) -> None:
    assert parse_address(text) is None


def test_plan_normalization_is_lenient_but_strips_runtime_marks() -> None:
    plan = normalize_plan(
        {"title": "t" * 300, "steps": ["bare", 7, {"status": "weird", "resolvedBy": "runtime", "settledAt": 1}]}
    )
    assert plan == {
        "title": "t" * 200,
        "steps": [
            {"id": "step-1", "label": "bare", "status": "pending"},
            {"id": "step-2", "label": "Step 2", "status": "pending"},
        ],
    }
    assert normalize_plan("nope") == {"steps": []}


def test_settle_carries_runtime_marks_and_settled_time() -> None:
    previous = {"steps": [{"id": "s1", "label": "a", "status": "done", "resolvedBy": "runtime"}], "settledAt": 5}
    again = settle(previous, normalize_plan({"steps": [{"id": "s1", "label": "a", "status": "done"}]}), None)
    assert again["steps"][0]["resolvedBy"] == "runtime" and again["settledAt"] == 5
    reopened = settle(previous, normalize_plan({"steps": [{"id": "s1", "label": "a", "status": "running"}]}), None)
    assert "resolvedBy" not in reopened["steps"][0] and "settledAt" not in reopened


def test_definition_limits() -> None:
    assert normalize_definition({**BASE, "name": "  spaced  "}).name == "spaced"
    cases = [
        ({"name": "   "}, "Name is required"),
        ({"name": "n" * 257}, "Name is too large"),
        ({"systemPrompt": "p" * (64 * 1024 + 1)}, "System prompt is too large"),
        ({"tools": ["x"] * 33}, "at most 32"),
        ({"tools": [" search"]}, "non-empty trimmed strings"),
        ({"tools": ["t" * 129]}, "at most 128"),
        ({"metadata": {"blob": "m" * (16 * 1024)}}, "metadata is too large"),
        ({"reasoningLevel": "extreme"}, "Reasoning level is invalid"),
        ({"reasoningLevel": "minimal"}, "accepts reasoning levels low, medium, high, xhigh"),
        ({"model": "gpt-4o", "reasoningLevel": "low"}, "does not support a reasoning level"),
        ({"colour": "blue"}, "Unknown agent definition field(s): colour"),
    ]
    for patch, fragment in cases:
        with pytest.raises(BadRequest) as info:
            normalize_definition({**BASE, **patch})
        assert fragment in info.value.message, (patch, info.value.message)
    assert len(normalize_definition({**BASE, "tools": ["t" * 128] * 32}).tools or ()) == 32  # 4 KiB total: the cap
    ok = normalize_definition({**BASE, "reasoningLevel": "xhigh", "tools": ["search", "publish"], "metadata": {"k": 1}})
    assert ok.reasoning_level == "xhigh" and ok.tools == ("search", "publish")
    assert normalize_definition(ok.to_json()) == ok
    blocks = [{"block": {"id": "b1", "type": "Paragraph", "text": "Hello"}, "children": []}]
    assert normalize_definition({**BASE, "systemPrompt": blocks}).system_prompt == "Hello"


def test_the_system_prompt_is_stored_as_a_block_tree_and_used_as_markdown() -> None:
    prompt = "# Role\n\nYou review **pull requests**.\n\n- be brief\n- cite lines\n"
    definition = normalize_definition({**BASE, "systemPrompt": prompt})
    stored = definition.to_json()["systemPrompt"]
    assert isinstance(stored, list) and stored[0]["block"]["type"] == "Heading"
    assert [c["block"]["text"] for c in stored[0]["children"][0]["children"]] == ["be brief", "cite lines"]
    # What the model and ~/self see is the tree rendered back: no frontmatter, no id markers.
    assert definition.system_prompt == "# Role\n\nYou review **pull requests**.\n  - be brief\n  - cite lines"
    again = normalize_definition(definition.to_json())
    assert again == definition and again.to_json()["systemPrompt"] == stored  # block ids survive reloads
    for bad, message in (
        ([{"block": {"id": "", "type": "Paragraph"}}], "System prompt blocks are invalid"),
        ([{"block": {"id": "a", "type": "Paragraph"}, "children": "x"}], "block children are invalid"),
        ([{"block": {"id": "a", "type": "Paragraph", "text": ""}}], "System prompt is required"),
    ):
        with pytest.raises(BadRequest) as info:
            normalize_definition({**BASE, "systemPrompt": bad})
        assert message in info.value.message


def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    db.close()
    db = Database(tmp_path / "h.db")
    with db.reading() as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM _harness_migrations")]
        assert names == [
            "m001_initial",
            "m002_tool_documents",
            "m003_secrets",
            "m004_providers",
            "m005_hypermedia",
            "m006_runs_by_tool_call",
            "m007_run_journal",
            "m008_open_calls",
            "m009_touched_tools",
            "m010_hm_materialized",
            "m011_thread_search",
            "m012_event_payloads",
            "m013_triggers",
            "m014_hm_activity",
            "m015_hm_search",
            "m016_run_waits",
            "m017_ipfs_blocks",
            "m018_attachments",
            "m019_hm_push",
            "m020_mcp_servers",
            "m021_store_meta",
            "m022_mrtr_relay",
            "m023_titles_indexed_by_code",
        ]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    db.close()


def test_a_newer_database_is_refused_with_advice(tmp_path: Path) -> None:
    Database(tmp_path / "h.db").close()
    conn = sqlite3.connect(tmp_path / "h.db")
    conn.execute("INSERT INTO _harness_migrations VALUES ('m999_future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError) as info:
        Database(tmp_path / "h.db")
    assert "newer mcp-harness" in info.value.message


def test_events_get_gapless_per_session_sequences(harness: Harness) -> None:
    agent = harness.agent()
    a = harness.sessions.create(harness.account_id, agent.id)
    b = harness.sessions.create(harness.account_id, agent.id)
    for i in range(3):
        harness.sessions.append(a.id, {"type": "message", "role": "user", "content": str(i)}, "user")
    harness.sessions.append(b.id, {"type": "error", "message": "x"}, "system")
    assert [e.seq for e in harness.sessions.events(a.id)] == [1, 2, 3]
    assert [(e.seq, e.actor) for e in harness.sessions.events(b.id)] == [(1, "system")]
    with pytest.raises(sqlite3.IntegrityError):
        harness.sessions.append(b.id, {"type": "message"}, "robot")  # type: ignore[arg-type]
    assert len(harness.sessions.events(b.id)) == 1


def test_one_standing_session_per_agent(harness: Harness) -> None:
    agent = harness.agent()
    first = harness.sessions.standing(harness.account_id, agent.id)
    assert harness.sessions.standing(harness.account_id, agent.id).id == first.id
    assert first.kind == "standing"


def test_agent_names_are_unique_and_delete_cleans_up(harness: Harness) -> None:
    agent = harness.agent()
    with pytest.raises(Conflict):
        harness.agents.create(harness.account_id, agent.definition)
    session = harness.sessions.create(harness.account_id, agent.id)
    harness.sessions.append(session.id, {"type": "message", "role": "user", "content": "hi"}, "user")
    agent.memory_dir.mkdir(parents=True, exist_ok=True)
    (agent.memory_dir / "f.txt").write_text("x", encoding="utf-8")
    harness.agents.delete(agent.id)
    assert harness.sessions.find(session.id) is None
    assert not agent.state_dir.exists()
    with harness.db.reading() as conn:
        assert conn.execute("SELECT COUNT(*) FROM session_events").fetchone()[0] == 0


def test_failed_nested_step_is_rolled_back_inside_outer_transaction(harness: Harness) -> None:
    """A helper that fails inside a caller's transaction leaves nothing behind, while the outer change commits."""
    agent = harness.agent()
    session = harness.sessions.create(harness.account_id, agent.id)
    with harness.db.transaction():
        harness.sessions.append(session.id, {"type": "message", "content": "kept"}, "user")
        try:
            with harness.db.transaction():
                harness.sessions.append(session.id, {"type": "message", "content": "dropped"}, "user")
                raise RuntimeError("inner step failed")
        except RuntimeError:
            pass
    contents = [e.payload["content"] for e in harness.sessions.events(session.id)]
    assert contents == ["kept"]
    assert [e.seq for e in harness.sessions.events(session.id)] == [1]


@pytest.mark.parametrize(
    "prompt",
    [
        "You are a careful assistant. Keep notes in your memory and check your work.",
        "Answer in French (always), cite sources: 1, 2 and 3; ask if unsure?",
        "Use 50% less words/phrases & be kind @ all times - thanks.",
    ],
)
def test_plain_prose_prompts_take_the_fast_path_to_the_same_blocks_and_markdown(prompt: str) -> None:
    from mcp_harness.definition import _plain_prompt  # pyright: ignore[reportPrivateUsage]
    from mcp_harness.hypermedia.blocks import tree_from_json, tree_to_json
    from mcp_harness.hypermedia.markdown import parse_markdown, render_markdown

    fast = _plain_prompt(prompt)
    assert fast is not None
    parsed = parse_markdown(prompt).tree
    assert render_markdown(parsed, None, block_ids=False, frontmatter=False).strip() == fast[0]
    slow = tree_to_json(parsed)
    assert [{**n["block"], "id": "x"} for n in fast[1]] == [{**n["block"], "id": "x"} for n in slow]
    stored: list[Any] = list(fast[1])
    assert _plain_prompt(stored) == (fast[0], fast[1])
    assert render_markdown(tree_from_json(stored), None, block_ids=False, frontmatter=False).strip() == fast[0]
    for not_plain in ("- a list", "# Heading", "some *emphasis*", "two\n\nparagraphs", "a_b", "<tag>"):
        assert _plain_prompt(not_plain) is None


def test_an_event_holding_a_lone_surrogate_is_stored_with_a_replacement_not_lost(harness: Harness) -> None:
    """Whoever appends it (a verb call's log, a model's reply decoded from JSON), an event with a lone surrogate
    is stored, readable, with U+FFFD in the surrogate's place; the session stays readable."""
    from mcp_harness.binding import SessionBinding

    session = harness.sessions.create(harness.account_id, harness.agent().id)
    harness.sessions.append(session.id, {"type": "message", "role": "assistant", "content": "x\ud800y"}, "agent")
    binding = SessionBinding(harness, agent_id=harness.agent().id, session_id=session.id)
    result, error = binding._invoke_sync("write", {"address": "~/memory/a\udcff", "content": "z\ud800"}, "agent")  # pyright: ignore[reportPrivateUsage]
    assert result is None and error is not None and "lone surrogate" in error.message
    events = harness.sessions.events(session.id)
    assert events[0].payload["content"] == "x\ufffdy"
    assert events[1].payload["input"] == {"address": "~/memory/a\ufffd", "content": "z\ufffd"}
    assert events[2].type == "tool_result" and "lone surrogate" in events[2].payload["error"]
