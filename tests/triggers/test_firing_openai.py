"""A schedule trigger's run on a real model wire (issue 16, "How it is checked"): the agent's provider is an
OpenAI-compatible server on loopback, nobody is connected, and the run the trigger starts reads its first message,
calls `write` to put a note in memory, and ends with a reply — over `POST /v1/chat/completions` as any such server
speaks it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_harness.binding import SessionBinding
from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.triggers.fire import CONTEXT_NOTE
from tests.conftest import serving
from tests.triggers.triggerkit import HOUR, Clock, firings

pytestmark = pytest.mark.anyio


def _reply(body: dict[str, Any], message: dict[str, Any], finish: str) -> JSONResponse:
    return JSONResponse(
        {
            "id": "chatcmpl-trigger",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220},
        }
    )


async def chat(request: Request) -> JSONResponse:
    """First call: write the note the prompt asks for; once the tool result is back: a closing reply."""
    body = await request.json()
    request.app.state.seen.append(body)
    if not any(m["role"] == "tool" for m in body["messages"]):
        arguments = json.dumps({"address": "~/memory/standup.md", "content": "standup noted"})
        call = {"id": "call_w", "type": "function", "function": {"name": "write", "arguments": arguments}}
        return _reply(body, {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
    return _reply(body, {"role": "assistant", "content": "The note is written."}, "stop")


@pytest.fixture
async def model_server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    app.state.seen = []
    async with serving(app) as base:
        yield base, app.state.seen


async def test_a_schedule_run_on_an_openai_compatible_server_writes_memory_with_nobody_connected(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    base, seen = model_server
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("local", "custom", base_url=f"{base}/v1", model="local-model")
        agent = harness.agent()
        raw = {**agent.definition.to_json(), "modelProvider": "local", "model": "local-model"}
        agent = harness.agents.update(agent.id, normalize_definition(raw))
        body = {
            "source": {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}},
            "prompt": "Write the standup note.",
        }
        saved, error = await SessionBinding(harness, agent_id=agent.id).invoke(
            "write", {"address": "~/triggers/standup", "content": json.dumps(body)}
        )
        assert error is None and saved is not None
        trigger = harness.triggers.get(saved.data["id"])
        assert trigger is not None
        harness.scheduler.clock = Clock(trigger.created_at + HOUR)  # an hour on: one occurrence is due
        async with harness.engine_running():  # what `serve` runs, whoever is connected
            with anyio.fail_after(30):
                while not firings(harness, trigger) or firings(harness, trigger)[0].run_id is None:
                    await anyio.sleep(0.05)
                (firing,) = firings(harness, trigger)
                run = await harness.engine.wait_for(firing.run_id or "")
        assert run.status == "succeeded" and run.origin == "trigger"
        assert (agent.memory_dir / "standup.md").read_text() == "standup noted"
        assert firings(harness, trigger)[0].status == "succeeded"
        first, second = seen[0], seen[1]
        assert first["model"] == "local-model" and first["messages"][0]["role"] == "system"
        prompt = first["messages"][1]
        assert prompt["role"] == "user" and prompt["content"].startswith(f"Write the standup note.\n\n{CONTEXT_NOTE}")
        assert "<trigger_context>" in prompt["content"]
        tool_message = next(m for m in second["messages"] if m["role"] == "tool")
        assert tool_message["tool_call_id"] == "call_w" and "standup.md" in tool_message["content"]
    finally:
        harness.close()
