"""`~/triggers/` through the SDK client (HARNESS §10, §11): write, list, read with recent firings, edit, delete,
ambiguous names, the refusals, `~/self`, the `<space>` index, the `harness://triggers/{name}` resource, and the
default mention trigger of an agent created with a signing identity."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity
from mcp_harness.runs.prompt import space_index
from mcp_harness.store._util import now_ms
from mcp_harness.triggers.defaults import MENTION_PROMPT
from mcp_harness.triggers.scheduler import Scheduler
from tests.conftest import call, refused, text_of
from tests.triggers.triggerkit import HOUR, Clock, save_trigger, schedule

pytestmark = pytest.mark.anyio

HOURLY = {
    "source": {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}},
    "prompt": "Tidy up.",
}


async def write(client: Client, name: str, body: dict[str, Any]) -> dict[str, Any]:
    return await call(client, "write", {"address": f"~/triggers/{name}", "content": json.dumps(body)})


async def test_a_trigger_is_written_listed_read_edited_and_deleted(client: Client, harness: Harness) -> None:
    saved = await write(client, "tidy", HOURLY)
    assert saved["summary"] == 'Saved trigger "tidy" (enabled): every hour.'
    assert saved["name"] == "tidy" and saved["enabled"] is True and saved["source"] == HOURLY["source"]
    listing = await call(client, "read", {"address": "~/triggers/"})
    assert listing["summary"].startswith("1 trigger. Read ~/triggers/<name> for one")
    assert listing["triggers"] == [
        {"name": "tidy", "id": saved["id"], "status": "active", "type": "schedule", "when": "every hour"}
    ]
    assert "run-completed" in listing["contract"] and "wake" in listing["contract"]
    one = await call(client, "read", {"address": "~/triggers/tidy"})
    assert one["id"] == saved["id"] and one["prompt"] == "Tidy up." and one["recentFirings"] == []
    assert one["summary"] == 'Trigger "tidy" (enabled): every hour.' and "continuation" not in one
    # Editing keeps the id; options.trigger works as content does.
    body = {**HOURLY, "enabled": False, "continuation": {"kind": "wake", "signal": "tidy"}}
    edited = await call(client, "write", {"address": "~/triggers/tidy", "options": {"trigger": body}})
    assert edited["id"] == saved["id"] and edited["summary"] == 'Saved trigger "tidy" (disabled): every hour.'
    again = await call(client, "read", {"address": f"~/triggers/{saved['id']}", "format": "json"})
    assert again["continuation"] == {"kind": "wake", "signal": "tidy"} and again["enabled"] is False
    gone = await call(client, "write", {"address": "~/triggers/tidy", "options": {"delete": True}})
    assert gone == {"summary": 'Deleted trigger "tidy".', "name": "tidy", "id": saved["id"], "deleted": True}
    nothing = await call(client, "write", {"address": "~/triggers/tidy", "options": {"delete": True}})
    assert nothing == {"summary": "No trigger named tidy; nothing to delete.", "name": "tidy", "deleted": False}
    missing = await call(client, "read", {"address": "~/triggers/tidy"})
    assert missing["summary"] == "No trigger named tidy." and missing["triggers"] == []
    assert harness.triggers.of_agent(harness.agent().id) == []


async def test_a_shared_name_is_refused_with_the_ids_and_an_id_names_one(client: Client, harness: Harness) -> None:
    await call(client, "read", {"address": "~/self"})  # the default agent exists
    first = save_trigger(harness, "dup", schedule(kind="interval", every=1, unit="hours"), now=now_ms())
    second = save_trigger(harness, "dup", schedule(kind="interval", every=2, unit="hours"), now=first.updated_at + 1)
    message = f'2 triggers are named "dup" — read one by id instead: ~/triggers/{second.id}, ~/triggers/{first.id}.'
    assert (await refused(client, "read", {"address": "~/triggers/dup"}))["message"] == message
    assert (await refused(client, "write", {"address": "~/triggers/dup", "content": json.dumps(HOURLY)}))[
        "message"
    ] == message
    by_id = await call(client, "read", {"address": f"~/triggers/{first.id}"})
    assert by_id["when"] == "every hour"
    edited = await write(client, first.id, {**HOURLY, "prompt": "Changed."})
    assert edited["id"] == first.id and edited["name"] == "dup"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"address": "~/triggers/t", "content": "{not json"}, "write ~/triggers/t expects JSON content: {source"),
        ({"address": "~/triggers/t"}, "expects JSON content (or options.trigger)"),
        ({"address": "~/triggers/t", "content": "[1]"}, "expects JSON content: {source, prompt"),
        ({"address": "~/triggers/a/b", "content": "{}"}, "A trigger name cannot contain '/'"),
        ({"address": "~/triggers/" + "n" * 300, "content": "{}"}, "A trigger name is at most 256 bytes"),
        (
            {"address": "~/triggers/t", "content": "{}", "options": {"force": True}},
            'does not understand option "force"',
        ),
        ({"address": "~/triggers/t", "options": {"delete": "yes"}}, "option delete must be true"),
        ({"address": "~/triggers/t", "content": json.dumps({**HOURLY, "source": {"type": "x"}})}, "source type 'x'"),
        ({"address": "~/triggers/", "content": "{}"}, "Unrecognized write address: ~/triggers/. Supported:"),
    ],
)
async def test_a_bad_write_is_refused_by_name(client: Client, arguments: dict[str, Any], fragment: str) -> None:
    error = await refused(client, "write", arguments)
    assert error["status"] == 400 and fragment in error["message"]


async def test_reads_take_no_options_and_a_run_filter_names_an_agent_you_may_act_as(
    client: Client, harness: Harness
) -> None:
    error = await refused(client, "read", {"address": "~/triggers/", "options": {"limit": 3}})
    assert 'does not understand option "limit"' in error["message"]
    watch = {"source": {"type": "run-completed", "agentId": "nobody"}, "prompt": "Look."}
    error = await refused(client, "write", {"address": "~/triggers/w", "content": json.dumps(watch)})
    assert error["status"] == 404 and "No agent 'nobody'" in error["message"]
    named = await write(client, "w", {**watch, "source": {"type": "run-completed", "agentId": "assistant"}})
    assert named["source"] == {"type": "run-completed", "agentId": harness.agent().id}


async def test_self_the_space_index_and_the_resource_show_the_triggers(client: Client, harness: Harness) -> None:
    await write(client, "tidy", HOURLY)
    await write(client, "off", {**HOURLY, "enabled": False})
    data = await call(client, "read", {"address": "~/self"})
    assert data["summary"] == 'You are "assistant" (scripted) with 2 triggers and 1 conversation.'
    assert [(t["name"], t["status"]) for t in data["triggers"]] == [("off", "disabled"), ("tidy", "active")]
    assert "## Triggers\n\n- off (disabled) — every hour\n- tidy — every hour" in text_of(
        await client.call_tool("read", {"address": "~/self"})
    )
    index = space_index(harness, harness.agent())
    assert (
        "triggers/ (read ~/triggers/; write ~/triggers/<name> creates or edits an automation) — active: tidy" in index
    )
    templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert "harness://triggers/{name}" in templates
    resource = (await client.read_resource("harness://triggers/tidy")).contents[0]
    assert getattr(resource, "text", "").startswith('Trigger "tidy" (enabled): every hour.\n\n## Prompt\n\nTidy up.')


async def test_the_index_collapses_with_the_count_of_active_triggers(harness: Harness) -> None:
    agent = harness.agent()
    for i in range(16):
        save_trigger(harness, f"{'x' * 120}-{i:02}", schedule(kind="interval", every=1, unit="hours"), now=i)
    index = space_index(harness, agent)
    assert "triggers/ — 16 active (read ~/triggers/)" in index and len(index) <= 2048


async def test_reading_one_shows_its_last_five_firings_with_their_threads(client: Client, harness: Harness) -> None:
    await call(client, "read", {"address": "~/self"})
    clock = Clock(now_ms())  # the server's own scheduler (the real clock) sees nothing due before the test's ticks
    trigger = save_trigger(harness, "hourly", schedule(kind="interval", every=1, unit="hours"), now=clock.now)
    sched = Scheduler(harness, wake_engine=lambda: None, clock=clock)
    for _ in range(7):
        clock.advance(HOUR)
        sched.tick()
    one = await call(client, "read", {"address": "~/triggers/hourly"})
    recent = one["recentFirings"]
    assert len(recent) == 5 and [f["firedAt"] for f in recent] == [clock.now - i * HOUR for i in range(5)]
    assert all(f["status"] == "started" and f["thread"] == f"thread:{f['sessionId']}" for f in recent)
    thread = await call(client, "read", {"address": recent[0]["thread"]})
    assert thread["title"].startswith("hourly — scheduled for ") and "<trigger_context>" in thread["markdown"]
    assert one["lastFiredAt"] == clock.now and trigger.id == one["id"]


def test_an_agent_created_with_a_signing_identity_answers_its_mentions(harness: Harness) -> None:
    identity = create_identity(harness, "Agent Smith")
    base = harness.default_definition().to_json()
    smith = harness.create_agent(normalize_definition({**base, "name": "smith", "signingKeys": [identity.name]}))
    (trigger,) = harness.triggers.of_agent(smith.id)
    assert trigger.name == "Mentions of smith" and trigger.enabled and trigger.prompt == MENTION_PROMPT
    assert trigger.source == {"type": "user-mention", "mentionedAccounts": [identity.account_id]}
    plain = harness.create_agent(normalize_definition({**base, "name": "plain"}))
    assert harness.triggers.of_agent(plain.id) == []


def test_the_cli_creates_the_default_mention_trigger_too(harness: Harness) -> None:
    from mcp_harness.cli import main

    identity = create_identity(harness, "Cli Agent")
    harness.close()
    args = ["agent", "create", "cli-agent", "--signing-key", identity.name, "--data-dir", str(harness.data_dir)]
    assert main(args) == 0
    reopened = Harness(harness.settings)
    try:
        agent = reopened.agent("cli-agent")
        assert [t.name for t in reopened.triggers.of_agent(agent.id)] == ["Mentions of cli-agent"]
    finally:
        reopened.close()


async def test_the_readme_example_saves_a_weekday_schedule(client: Client) -> None:
    weekdays = {"kind": "weekly", "daysOfWeek": [1, 2, 3, 4, 5], "timeOfDay": "08:30", "timezone": "Europe/Paris"}
    body = {"source": {"type": "schedule", "schedule": weekdays}, "prompt": "Summarize yesterday's notes."}
    saved = await write(client, "morning", body)
    assert (
        saved["summary"] == 'Saved trigger "morning" (enabled): every Mon, Tue, Wed, Thu, Fri at 08:30 (Europe/Paris).'
    )
