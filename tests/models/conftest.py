"""What the model suites share: a loopback fake of a provider's HTTP API that records what it was sent, a fresh
shared HTTP client per test, no ambient provider keys, and harnesses with given providers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.models import wire
from mcp_harness.models.wire import Message, ModelRequest, ToolCall, ToolSpec
from tests.conftest import serving

KEY = "sk-test-KEY-0123456789"
SCHEMA = {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]}
TOOLS = (ToolSpec("read", "Read an address.", SCHEMA), ToolSpec("plan", "Keep a checklist.", {"type": "object"}))


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeAPI:
    """A loopback server that records each request and answers from a queue (200 `{}` once it is empty)."""

    base: str = ""
    seen: list[Seen] = field(default_factory=list[Seen])
    replies: list[Response] = field(default_factory=list[Response])
    delay_s: float = 0.0

    def reply(self, payload: Any, status: int = 200) -> None:
        self.replies.append(JSONResponse(payload, status_code=status))


@asynccontextmanager
async def serve_fake() -> AsyncIterator[FakeAPI]:
    api = FakeAPI()

    async def handle(request: Request) -> Response:
        raw = await request.body()
        api.seen.append(Seen(request.url.path, dict(request.headers), json.loads(raw) if raw else None))
        if api.delay_s:
            await anyio.sleep(api.delay_s)
        return api.replies.pop(0) if api.replies else JSONResponse({})

    app = Starlette(routes=[Route("/{path:path}", handle, methods=["GET", "POST"])])
    async with serving(app, lifespan="off") as base:
        api.base = base
        yield api


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    async with serve_fake() as served:
        yield served


@pytest.fixture
async def _fresh_http_client() -> AsyncIterator[None]:
    """The shared client's pool belongs to this test's event loop; close it before the loop goes away. Not autouse:
    an async fixture needs an anyio test, so the suites that talk HTTP name it in their `pytestmark`."""
    yield
    await wire.aclose_shared_http_client()


@pytest.fixture(autouse=True)
def _no_ambient_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own keys must not leak into (or change) these tests."""
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("MCP_HARNESS_CONFIG", raising=False)


@pytest.fixture
def open_harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    opened: list[Harness] = []

    def make(**providers: dict[str, Any]) -> Harness:
        h = Harness(load_settings(data_dir=tmp_path / f"data{len(opened)}", providers=providers or None))
        opened.append(h)
        return h

    yield make
    for h in opened:
        h.close()


def conversation() -> tuple[Message, ...]:
    """A brief, an assistant turn calling two tools, their results (one failed), and a follow-up."""
    return (
        Message("user", "Summarise ~/memory/notes.md"),
        Message(
            "assistant",
            "Reading it.",
            tool_calls=(
                ToolCall("c1", "read", {"address": "~/memory/notes.md"}),
                ToolCall("c2", "plan", {}, raw_arguments="{oops"),
            ),
        ),
        Message("tool", "# Notes\nbuy milk", tool_call_id="c1", name="read"),
        Message("tool", "plan failed", tool_call_id="c2", name="plan", is_error=True),
        Message("user", "Be brief."),
    )


def ask(brief: str, turns_done: int = 0, context_key: str = "") -> ModelRequest:
    """A request to the scripted provider: the brief, then `turns_done` assistant turns each answered "go on"."""
    messages: list[Message] = [Message("user", brief)]
    for i in range(turns_done):
        messages += [Message("assistant", f"turn {i}"), Message("user", "go on")]
    return ModelRequest("scripted", "", tuple(messages), context_key=context_key)
