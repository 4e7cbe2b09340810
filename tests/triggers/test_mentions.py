"""The default mention trigger end to end (issue 16 points 4 and 8): an agent whose primary key is an identity
answers a comment that another identity publishes through `write hm://` and that @-mentions its account — a run
on the scripted provider, with the mention as data in `<trigger_context>` and the agent's own grants, no more — and
a plain-text "@name" fires nothing."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcp_harness.binding import SessionBinding
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity
from mcp_harness.runs.records import RunRecord
from mcp_harness.store.agents import AgentRecord
from mcp_harness.store.triggers import TriggerRecord
from mcp_harness.triggers.defaults import MENTION_PROMPT
from mcp_harness.triggers.fire import CONTEXT_NOTE
from tests.triggers.monitorkit import agent_signing_as
from tests.triggers.triggerkit import firings

pytestmark = pytest.mark.anyio


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    return [
        {
            "when": MENTION_PROMPT,
            "turns": [
                {"toolCalls": [{"name": "call", "input": {"tool": "search", "input": {"query": "launch"}}}]},
                {"text": "Answered the mention."},
            ],
        }
    ]


async def write_as(harness: Harness, agent: AgentRecord, arguments: dict[str, Any]) -> dict[str, Any]:
    result, error = await SessionBinding(harness, agent_id=agent.id).invoke("write", arguments)
    assert error is None and result is not None, error
    return result.data


async def run_of(harness: Harness, trigger: TriggerRecord) -> RunRecord:
    with anyio.fail_after(20):
        while not firings(harness, trigger):
            await anyio.sleep(0.01)
    (firing,) = firings(harness, trigger)
    assert firing.run_id is not None
    return await harness.engine.wait_for(firing.run_id)


async def test_a_mention_by_another_identity_starts_a_thread_and_a_plain_at_name_does_not(scripted: Harness) -> None:
    h = scripted
    alice, bob = create_identity(h, "Alice"), create_identity(h, "Bob")
    # The helper signs as Alice and may not `search`; the writer is someone else, signing as Bob.
    helper = agent_signing_as(h, "helper", alice, tools=["execute"])
    writer = agent_signing_as(h, "writer", bob)
    (default,) = h.triggers.of_agent(helper.id)
    assert default.name == "Mentions of helper" and default.enabled
    assert default.source == {"type": "user-mention", "mentionedAccounts": [alice.account_id]}
    (bobs,) = h.triggers.of_agent(writer.id)  # the writer has its own, on Bob's account
    post = f"hm://{bob.account_id}/launch"
    async with h.engine_running():
        await write_as(h, writer, {"address": post, "content": "Launch plan.", "options": {"name": "Launch"}})
        plain = {"action": "comment", "signer": "Bob"}
        await write_as(h, writer, {"address": post, "content": "@helper @Alice please look.", "options": plain})
        linked = f"[helper](hm://{alice.account_id}), please summarize the launch plan."
        said = await write_as(h, writer, {"address": post, "content": linked, "options": plain})
        run = await run_of(h, default)
    assert run.status == "succeeded" and run.origin == "trigger" and run.agent_id == helper.id
    (firing,) = firings(h, default)  # the plain "@helper" fired nothing; the linked mention fired once
    assert firing.status == "succeeded" and firings(h, bobs) == []  # a mention of Alice is not one of Bob
    assert firing.activity is not None and firing.activity["type"] == "comment"
    assert f"hm://{firing.activity['event']['comment']['id']}" == said["id"]
    events = h.sessions.events(run.session_id or "")
    first = events[0]
    assert first.actor == "trigger" and first.payload["role"] == "user"
    prompt, block = first.payload["content"].split("<trigger_context>\n")
    assert prompt == f"{MENTION_PROMPT}\n\n{CONTEXT_NOTE}\n"
    # The comment reaches the model only inside the block, as data.
    assert "summarize the launch plan" in block and f"hm://{alice.account_id}" in block
    assert "summarize" not in (h.sessions.get(run.session_id or "").title or "")
    # The run has the helper's grants: search stays ungranted.
    (result,) = [e.payload for e in events if e.type == "tool_result"]
    assert result["name"] == "call"
    assert result["output"]["summary"] == "No callable tool named search. Here is what you can call."
    assert "search" not in result["output"]["tools"]
    assert run.input == {"scopeAgentId": helper.id}
