"""The Anthropic messages client against a real loopback server speaking its wire format."""

from __future__ import annotations

import pytest

from mcp_harness.models.anthropic import AnthropicClient, messages_body
from mcp_harness.models.wire import Message, ModelRequest, ModelResponse, ToolCall, Usage
from tests.models.conftest import KEY, SCHEMA, TOOLS, FakeAPI, conversation

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_fresh_http_client")]


async def test_anthropic_sends_blocks_merged_tool_results_thinking_and_cache_markers(api: FakeAPI) -> None:
    thinking = {"type": "thinking", "thinking": "Read, then plan.", "signature": "sig=="}
    first, assistant, *rest = conversation()
    messages = (first, Message("assistant", assistant.content, assistant.tool_calls, reasoning=(thinking,)), *rest)
    api.reply({"content": [{"type": "text", "text": "Milk."}], "stop_reason": "end_turn"})
    client = AnthropicClient(base_url=api.base, api_key=KEY)
    request = ModelRequest("claude-sonnet-4-5", "You are terse.", messages, TOOLS, reasoning_level="low")
    assert (await client.complete(request)).text == "Milk."
    [seen] = api.seen
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == KEY and seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    cache = {"type": "ephemeral"}
    assert seen.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192 + 4096,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": cache}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Summarise ~/memory/notes.md"}]},
            {
                "role": "assistant",
                "content": [
                    thinking,
                    {"type": "text", "text": "Reading it."},
                    {"type": "tool_use", "id": "c1", "name": "read", "input": {"address": "~/memory/notes.md"}},
                    {"type": "tool_use", "id": "c2", "name": "plan", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "# Notes\nbuy milk"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "plan failed", "is_error": True},
                    {"type": "text", "text": "Be brief.", "cache_control": cache},
                ],
            },
        ],
        "tools": [
            {"name": "read", "description": "Read an address.", "input_schema": SCHEMA},
            {"name": "plan", "description": "Keep a checklist.", "input_schema": {"type": "object"}},
        ],
        "thinking": {"type": "enabled", "budget_tokens": 4096},
    }


async def test_anthropic_parses_thinking_text_tool_uses_and_cache_usage(api: FakeAPI) -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    api.reply(
        {
            "model": "claude-sonnet-4-5-20250929",
            "stop_reason": "tool_use",
            "content": [
                thinking,
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"address": "~/self"}},
                {"type": "tool_use", "id": "t2", "name": "plan", "input": "not an object"},
            ],
            "usage": {
                "input_tokens": 12,
                "output_tokens": 34,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 56,
            },
        }
    )
    reply = await AnthropicClient(base_url=api.base, api_key=KEY).complete(
        ModelRequest("claude-sonnet-4-5", "", (Message("user", "go"),))
    )
    assert reply == ModelResponse(
        "Looking.",
        (ToolCall("t1", "read", {"address": "~/self"}), ToolCall("t2", "plan", {}, raw_arguments='"not an object"')),
        Usage(input=12, output=34, cache_read=1000, cache_write=56),
        stop_reason="tool_use",
        model="claude-sonnet-4-5-20250929",
        reasoning=(thinking,),
    )
    assert reply.usage.total == 1102


@pytest.mark.parametrize(
    ("model", "level", "max_out", "budget", "max_tokens"),
    [
        ("claude-sonnet-4-5", None, None, None, 8192),
        ("claude-sonnet-4-5", "minimal", None, 1024, 8192 + 1024),
        ("claude-3-7-sonnet-latest", "high", None, 16384, 8192 + 16384),
        ("claude-opus-4-1", "medium", 3000, 1500, 3000),  # capped at half an explicit maximum
        ("claude-opus-4-1", "medium", 1500, None, 1500),  # under the API's 1024 minimum: off
        ("claude-3-5-sonnet-latest", "high", None, None, 8192),  # the model cannot think
    ],
)
async def test_anthropic_thinking_budget_per_level(
    model: str, level: str | None, max_out: int | None, budget: int | None, max_tokens: int
) -> None:
    body = messages_body(
        ModelRequest(model, "", (Message("user", "x"),), reasoning_level=level, max_output_tokens=max_out), model
    )
    assert body.get("thinking") == (None if budget is None else {"type": "enabled", "budget_tokens": budget})
    assert body["max_tokens"] == max_tokens
    assert "temperature" not in body


async def test_anthropic_leaves_thinking_off_in_a_tool_loop_that_has_no_thinking_blocks() -> None:
    request = ModelRequest("claude-sonnet-4-5", "", conversation(), reasoning_level="high")
    body = messages_body(request, "claude-sonnet-4-5")
    assert "thinking" not in body and body["max_tokens"] == 8192
