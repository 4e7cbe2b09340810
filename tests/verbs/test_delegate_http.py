"""Delegation end to end against local HTTP model servers speaking the OpenAI and Anthropic wire formats.

The servers are real (uvicorn on loopback) and answer like the providers do: the child's first request gets a
`return_result` tool call with a wrong type, the second (after the schema error comes back) a valid one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call, serving

pytestmark = pytest.mark.anyio

ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


def _answer_for(tool_results: int) -> Any:
    return "five" if tool_results == 0 else 5


async def openai_chat(request: Request) -> JSONResponse:
    body = await request.json()
    request.app.state.seen.append(body)
    results = sum(1 for m in body["messages"] if m["role"] == "tool")
    call = {
        "id": f"call_{results}",
        "type": "function",
        "function": {"name": "return_result", "arguments": f'{{"answer": {_json(_answer_for(results))}}}'},
    }
    return JSONResponse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }
    )


async def anthropic_messages(request: Request) -> JSONResponse:
    body = await request.json()
    request.app.state.seen.append(body)
    results = sum(
        1
        for m in body["messages"]
        if m["role"] == "user"
        and isinstance(m["content"], list)
        and any(b.get("type") == "tool_result" for b in m["content"])
    )
    block = {
        "type": "tool_use",
        "id": f"toolu_{results}",
        "name": "return_result",
        "input": {"answer": _answer_for(results)},
    }
    return JSONResponse(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": "Delivering."}, block],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 120, "output_tokens": 12},
        }
    )


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


@pytest.fixture
async def model_server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", openai_chat, methods=["POST"]),
            Route("/v1/messages", anthropic_messages, methods=["POST"]),
        ]
    )
    app.state.seen = []
    async with serving(app) as base:
        yield base, app.state.seen


async def test_openai_compatible_child_corrects_itself_and_delivers(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    base, seen = model_server
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("local", "custom", base_url=f"{base}/v1", model="local-model")
        agent = harness.agent()
        raw = {**agent.definition.to_json(), "modelProvider": "local", "model": "local-model"}
        harness.agents.update(agent.id, normalize_definition(raw))
        async with Client(build_server(harness)) as c:
            with anyio.fail_after(30):
                result = await call(c, "delegate", {"brief": "Count the fingers on one hand.", "output": ANSWER})
        assert result["status"] == "succeeded" and result["output"] == {"answer": 5}
        first, second = seen[0], seen[1]
        assert first["model"] == "local-model"
        assert first["messages"][0]["role"] == "system" and "<space>" in first["messages"][0]["content"]
        assert first["messages"][1] == {"role": "user", "content": "Count the fingers on one hand."}
        tools = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
        assert tools["return_result"] == ANSWER and "delegate" in tools and "read" in tools
        tool_message = next(m for m in second["messages"] if m["role"] == "tool")
        assert tool_message["tool_call_id"] == "call_0"
        assert "Result does not match the required schema" in tool_message["content"]
        usage = harness.runs.get(result["runId"]).usage
        assert usage is not None and usage["input"] == 200 and usage["output"] == 20
    finally:
        harness.close()


async def test_anthropic_child_delivers_through_the_messages_api(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hosted types are pinned to their real URLs; here the pin is moved to the loopback server, which speaks the
    Anthropic Messages wire format."""
    from mcp_harness.models import catalog

    base, seen = model_server
    moved = dataclasses.replace(catalog.KINDS["anthropic"], pinned_url=base)
    monkeypatch.setitem(catalog.KINDS, "anthropic", moved)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("claude", "anthropic", model="claude-sonnet-4-5")
        agent = harness.agent()
        raw = {**agent.definition.to_json(), "modelProvider": "claude", "model": "claude-sonnet-4-5"}
        harness.agents.update(agent.id, normalize_definition(raw))
        async with Client(build_server(harness)) as c:
            with anyio.fail_after(30):
                result = await call(c, "delegate", {"brief": "Count again.", "output": ANSWER})
        assert result["status"] == "succeeded" and result["output"] == {"answer": 5}
        first = seen[0]
        assert "<space>" in str(first["system"]) and first["messages"][0]["role"] == "user"
        assert {t["name"]: t["input_schema"] for t in first["tools"]}["return_result"] == ANSWER
    finally:
        harness.close()


async def test_the_sampling_provider_asks_the_connected_clients_model(tmp_path: Path) -> None:
    """A child on the `sampling` provider is run by the MCP client's own model: the server sends
    sampling/createMessage with the child's tools, and the client answers with a return_result tool use."""
    import mcp_types as types

    seen: list[types.CreateMessageRequestParams] = []

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResultWithTools:
        seen.append(params)
        use = types.ToolUseContent(name="return_result", id="use-1", input={"answer": 3})
        return types.CreateMessageResultWithTools(
            role="assistant", content=[use], model="client-model", stop_reason="toolUse"
        )

    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        agent = harness.agent()
        raw = {**agent.definition.to_json(), "modelProvider": "sampling", "model": "client-model"}
        harness.agents.update(agent.id, normalize_definition(raw))
        capabilities = types.SamplingCapability(tools=types.SamplingToolsCapability())
        async with Client(
            build_server(harness), mode="legacy", sampling_callback=sample, sampling_capabilities=capabilities
        ) as c:
            await c.list_tools()
            with anyio.fail_after(30):
                result = await call(c, "delegate", {"brief": "How many?", "output": ANSWER})
        assert result["status"] == "succeeded" and result["output"] == {"answer": 3}
        assert seen and "return_result" in [t.name for t in seen[0].tools or []]
        assert seen[0].system_prompt is not None and "<space>" in seen[0].system_prompt
    finally:
        harness.close()
