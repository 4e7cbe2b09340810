"""Images reach vision models as real image parts (issue 18): a delegated child whose brief names an attachment, and
whose `read attachment:<id>` shows one, sends them to a loopback OpenAI-compatible server as `image_url` parts
(data URLs) and to a loopback Anthropic-format server as `image` blocks (base64 source); a model the catalog says
takes no images gets a text note naming what was not shown."""

from __future__ import annotations

import base64
import dataclasses
import io
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
from mcp_harness.models.vision import model_accepts_images
from mcp_harness.runs.images import MAX_IMAGES_PER_REQUEST
from mcp_harness.server import build_server
from tests.conftest import call, serving
from tests.store.test_attachments import tiny_png

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_fresh_http_client")]

PNG = tiny_png(3, 3)
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def _openai_reply(body: dict[str, Any], turn: int) -> dict[str, Any]:
    brief = body["messages"][1]["content"]
    text = brief if isinstance(brief, str) else brief[0]["text"]
    ident = text.split("attachment:")[1][:64]
    if turn == 0 and "then read" in text:
        call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"address": "attachment:'}}
        call["function"]["arguments"] += f'{ident}"}}'
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        message = {"role": "assistant", "content": "A red square."}
    return {"choices": [{"index": 0, "finish_reason": "stop", "message": message}], "model": body["model"]}


def _anthropic_reply(body: dict[str, Any], turn: int) -> dict[str, Any]:
    text = next(b["text"] for b in body["messages"][0]["content"] if b["type"] == "text")
    ident = text.split("attachment:")[1][:64]
    if turn == 0:
        content = [{"type": "tool_use", "id": "t1", "name": "read", "input": {"address": f"attachment:{ident}"}}]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": "A red square."}], "end_turn"
    return {"type": "message", "role": "assistant", "model": body["model"], "content": content, "stop_reason": stop}


@pytest.fixture
async def model_server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    async def openai(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        return JSONResponse(_openai_reply(body, sum(1 for m in body["messages"] if m["role"] == "tool")))

    async def anthropic(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        results = sum(1 for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result")
        return JSONResponse(_anthropic_reply(body, results))

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", openai, methods=["POST"]),
            Route("/v1/messages", anthropic, methods=["POST"]),
        ]
    )
    async with serving(app) as base:
        yield base, seen


def on_model(harness: Harness, provider: str, model: str) -> str:
    """Put the default agent on `provider`/`model`; return a conversation of it holding PNG as attachment."""
    agent = harness.agent()
    raw = {**agent.definition.to_json(), "modelProvider": provider, "model": model}
    harness.agents.update(agent.id, normalize_definition(raw))
    return harness.sessions.create(harness.account_id, agent.id).id


async def delegate(harness: Harness, session: str, brief: str) -> dict[str, Any]:
    async with Client(build_server(harness, session_id=session)) as c:
        with anyio.fail_after(30):
            return await call(c, "delegate", {"brief": brief})


async def test_an_openai_compatible_vision_model_gets_image_url_parts(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    base, seen = model_server
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("local", "custom", base_url=f"{base}/v1", model="gpt-4o")
        session = on_model(harness, "local", "gpt-4o")
        ident = harness.attachments.add(session, "red.png", None, io.BytesIO(PNG)).id
        result = await delegate(harness, session, f"Describe attachment:{ident}, then read it.")
        assert result["status"] == "succeeded" and result["output"]["text"] == "A red square."
        first, second = seen
        assert first["messages"][1] == {
            "role": "user",
            "content": [
                {"type": "text", "text": f"Describe attachment:{ident}, then read it."},
                {"type": "image_url", "image_url": {"url": DATA_URL}},
            ],
        }
        tool, carrier = second["messages"][-2:]  # the tool result, then the user message holding its image
        assert tool["role"] == "tool" and tool["tool_call_id"] == "c1" and '"shownAsImage": true' in tool["content"]
        assert carrier["role"] == "user" and carrier["content"][0]["type"] == "text"
        assert carrier["content"][1] == {"type": "image_url", "image_url": {"url": DATA_URL}}
    finally:
        harness.close()


async def test_an_anthropic_model_gets_image_blocks_in_the_brief_and_in_tool_results(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_harness.models import catalog

    base, seen = model_server
    monkeypatch.setitem(catalog.KINDS, "anthropic", dataclasses.replace(catalog.KINDS["anthropic"], pinned_url=base))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("claude", "anthropic", model="claude-sonnet-4-5")
        session = on_model(harness, "claude", "claude-sonnet-4-5")
        ident = harness.attachments.add(session, "red.png", None, io.BytesIO(PNG)).id
        result = await delegate(harness, session, f"What is in attachment:{ident}?")
        assert result["status"] == "succeeded"
        block = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
        }
        first, second = seen
        assert first["messages"][0]["content"][1] == block
        tool_result = next(b for m in second["messages"] for b in m["content"] if b["type"] == "tool_result")
        assert tool_result["tool_use_id"] == "t1" and tool_result["content"][1] == block
        assert tool_result["content"][0]["type"] == "text"
    finally:
        harness.close()


async def test_a_model_without_image_input_gets_a_note_instead(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    base, seen = model_server
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("local", "custom", base_url=f"{base}/v1", model="gpt-3.5-turbo")
        session = on_model(harness, "local", "gpt-3.5-turbo")
        ident = harness.attachments.add(session, "red.png", None, io.BytesIO(PNG)).id
        result = await delegate(harness, session, f"Describe attachment:{ident}, then read it.")
        assert result["status"] == "succeeded"
        brief = seen[0]["messages"][1]["content"]
        assert isinstance(brief, str) and "image_url" not in str(seen[0])
        assert f"[attachment red.png (attachment:{ident}) is an image (image/png, {len(PNG)} bytes) not shown" in brief
        assert "the model gpt-3.5-turbo does not accept images." in brief
        tool = next(m for m in seen[1]["messages"] if m["role"] == "tool")
        assert '"shownAsImage": false' in tool["content"] and "does not accept images" in tool["content"]
    finally:
        harness.close()


async def test_a_brief_sent_as_content_blocks_stores_its_image_and_the_model_receives_it(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """tools/call arguments are plain JSON; a client that builds them in code may send the brief as MCP content
    blocks, and the image in it reaches the child's model."""
    base, seen = model_server
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("local", "custom", base_url=f"{base}/v1", model="gpt-4o")
        session = on_model(harness, "local", "gpt-4o")
        brief = [
            {"type": "text", "text": "What colour is this?"},
            {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
            {"type": "resource_link", "uri": "harness://memory/notes.md", "name": "notes"},
        ]
        async with Client(build_server(harness, session_id=session)) as c:
            with anyio.fail_after(30):
                result = await call(c, "delegate", {"brief": brief})
            bad = await c.call_tool("delegate", {"brief": [{"type": "image", "data": "%%%", "mimeType": "image/png"}]})
        assert result["status"] == "succeeded"
        [record] = harness.attachments.list(session)
        parts = seen[0]["messages"][1]["content"]
        assert parts[0]["text"] == (
            "What colour is this?\n\nAttached:\n"
            f"- attachment:{record.id} (image-2.png, image/png, {len(PNG)} bytes)\n- harness://memory/notes.md (notes)"
        )
        assert parts[1] == {"type": "image_url", "image_url": {"url": DATA_URL}}
        assert bad.is_error and "its data is not base64" in bad.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
    finally:
        harness.close()


async def test_only_the_most_recent_images_travel_with_a_request(
    model_server: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    base, seen = model_server
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        harness.providers.add("local", "custom", base_url=f"{base}/v1", model="gpt-4o")
        session = on_model(harness, "local", "gpt-4o")
        ids = [
            harness.attachments.add(session, f"p{i}.png", None, io.BytesIO(tiny_png(i + 1))).id
            for i in range(MAX_IMAGES_PER_REQUEST + 1)
        ]
        await delegate(harness, session, "Compare " + ", ".join(f"attachment:{i}" for i in ids))
        parts = seen[0]["messages"][1]["content"]
        assert sum(1 for p in parts if p["type"] == "image_url") == MAX_IMAGES_PER_REQUEST
        assert "most recent images travel with each request" in parts[0]["text"]
    finally:
        harness.close()


@pytest.mark.parametrize(
    ("provider_type", "model", "accepts"),
    [
        ("openai", "gpt-4o-mini", True),
        ("openai", "gpt-5.1", True),
        ("openai", "o3-mini", False),
        ("openai", "gpt-3.5-turbo", False),
        ("anthropic", "claude-3-5-haiku-latest", True),
        ("anthropic", "claude-2.1", False),
        ("google", "gemini-2.5-flash", True),
        ("openrouter", "anthropic/claude-sonnet-4.5", True),
        ("ollama", "llava:13b", True),
        ("ollama", "qwen2.5vl:7b", True),
        ("ollama", "llama3.1:8b", False),
        ("custom", "my-model", False),
        ("sampling", "client", False),
    ],
)
async def test_the_catalog_says_which_models_take_images(provider_type: str, model: str, accepts: bool) -> None:
    assert model_accepts_images(provider_type, model) is accepts
