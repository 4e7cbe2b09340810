"""The OpenAI chat completions client against a real loopback server speaking its wire format."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_harness.harness import Harness
from mcp_harness.models.clients import open_client
from mcp_harness.models.openai_chat import OpenAIChatClient, chat_body
from mcp_harness.models.wire import Message, ModelRequest, ModelResponse, ToolCall, Usage
from tests.models.conftest import KEY, SCHEMA, TOOLS, FakeAPI, conversation

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_fresh_http_client")]


async def test_openai_chat_sends_the_conversation_tools_and_key_of_a_custom_provider(
    api: FakeAPI, open_harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_KEY", KEY)
    h = open_harness(local={"type": "custom", "base_url": f"{api.base}/v1", "api_key_env": "LOCAL_KEY"})
    client = await open_client(h, "local")
    assert isinstance(client, OpenAIChatClient)
    api.reply({"choices": [{"message": {"role": "assistant", "content": "Milk."}, "finish_reason": "stop"}]})
    request = ModelRequest(
        "qwen3", "You are terse.", conversation(), TOOLS, reasoning_level="high", max_output_tokens=99
    )
    reply = await client.complete(request)
    assert reply == ModelResponse("Milk.", (), Usage(), stop_reason="stop")
    [seen] = api.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body == {
        "model": "qwen3",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Summarise ~/memory/notes.md"},
            {
                "role": "assistant",
                "content": "Reading it.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"address": "~/memory/notes.md"}'},
                    },
                    {"id": "c2", "type": "function", "function": {"name": "plan", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "# Notes\nbuy milk"},
            {"role": "tool", "tool_call_id": "c2", "content": "plan failed"},
            {"role": "user", "content": "Be brief."},
        ],
        "tools": [
            {"type": "function", "function": {"name": "read", "description": "Read an address.", "parameters": SCHEMA}},
            {
                "type": "function",
                "function": {"name": "plan", "description": "Keep a checklist.", "parameters": {"type": "object"}},
            },
        ],
        # A custom server gets no reasoning field (the model's support is unknown) and `max_tokens`.
        "max_tokens": 99,
    }


async def test_openai_chat_parses_text_several_tool_calls_malformed_arguments_and_cached_usage(api: FakeAPI) -> None:
    api.reply(
        {
            "model": "gpt-5.2-2026",
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "Let me look.",
                        "tool_calls": [
                            {
                                "id": "a",
                                "type": "function",
                                "function": {"name": "read", "arguments": '{"address":"x"}'},
                            },
                            {"id": "b", "type": "function", "function": {"name": "plan", "arguments": "{not json"}},
                            {"id": "c", "type": "function", "function": {"name": "plan", "arguments": "[1]"}},
                            {"id": "d", "type": "function", "function": {"name": "plan", "arguments": ""}},
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 100}},
        }
    )
    client = OpenAIChatClient(base_url=api.base, api_key=KEY, provider_type="openai", name="oai")
    reply = await client.complete(ModelRequest("gpt-5.2", "", (Message("user", "hi"),), reasoning_level="xhigh"))
    assert reply == ModelResponse(
        "Let me look.",
        (
            ToolCall("a", "read", {"address": "x"}),
            ToolCall("b", "plan", {}, raw_arguments="{not json"),
            ToolCall("c", "plan", {}, raw_arguments="[1]"),
            ToolCall("d", "plan", {}),
        ),
        Usage(input=20, output=30, cache_read=100),
        stop_reason="tool_calls",
        model="gpt-5.2-2026",
    )
    assert api.seen[0].body == {
        "model": "gpt-5.2",
        "messages": [{"role": "user", "content": "hi"}],
        "reasoning_effort": "xhigh",
    }


@pytest.mark.parametrize(
    ("provider_type", "model", "level", "expected"),
    [
        ("openai", "gpt-5.2", None, "none"),  # reasons by default, so "no level" must be said
        ("openai", "gpt-5.1", "xhigh", "high"),  # clamped to what the model takes
        ("openai", "gpt-5", "minimal", "minimal"),
        ("openai", "gpt-5", None, None),
        ("openai", "o3", "minimal", "low"),
        ("openai", "gpt-4o", "high", None),
        ("google", "gemini-2.5-flash", "medium", "medium"),
        ("google", "gemini-2.0-flash", "medium", None),
        ("openrouter", "openai/gpt-5.2", "high", None),
        ("custom", "gpt-5.2", "high", None),
    ],
)
async def test_openai_reasoning_effort_follows_the_models_support(
    provider_type: str, model: str, level: str | None, expected: str | None
) -> None:
    body = chat_body(ModelRequest(model, "", (), reasoning_level=level, max_output_tokens=5), model, provider_type)
    assert body.get("reasoning_effort") == expected
    assert ("max_completion_tokens" in body) == (provider_type == "openai")


async def test_openai_without_tool_call_ids_gets_unique_ones_and_content_parts_are_joined(api: FakeAPI) -> None:
    api.reply(
        {
            "choices": [
                {
                    "message": {
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        "tool_calls": [
                            {"function": {"name": "read", "arguments": {"address": "y"}}},
                            {"id": "", "function": {"name": "read", "arguments": "{}"}},
                        ],
                    }
                }
            ]
        }
    )
    reply = await OpenAIChatClient(base_url=api.base).complete(ModelRequest("m", "", (Message("user", "hi"),)))
    assert reply.text == "ab"
    first, second = reply.tool_calls
    assert first.arguments == {"address": "y"} and first.id.startswith("call-") and first.id != second.id
    assert "authorization" not in api.seen[0].headers
