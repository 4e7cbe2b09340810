"""Model clients against real loopback servers speaking the OpenAI and Anthropic wire formats; scripted and
sampling clients; the choice of client per provider type."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.models import wire
from mcp_harness.models.anthropic import AnthropicClient, messages_body
from mcp_harness.models.clients import client_for, open_client
from mcp_harness.models.openai_chat import OpenAIChatClient, chat_body
from mcp_harness.models.sampling import NO_SAMPLER, SamplingClient
from mcp_harness.models.scripted import NO_SCRIPT_TEXT, ScriptedClient
from mcp_harness.models.wire import (
    Message,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
    ToolSpec,
    Usage,
)
from tests.conftest import serving

pytestmark = pytest.mark.anyio

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


@pytest.fixture(autouse=True)
async def _fresh_http_client() -> AsyncIterator[None]:
    """The shared client's pool belongs to this test's event loop; close it before the loop goes away."""
    yield
    await wire.aclose_shared_http_client()


@pytest.fixture(autouse=True)
def _no_ambient_keys(monkeypatch: pytest.MonkeyPatch) -> None:
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


# -- OpenAI chat completions ----------------------------------------------------------------------------------


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


# -- Anthropic messages ---------------------------------------------------------------------------------------


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


# -- errors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [(400, "config-error", False), (401, "config-error", False), (429, "provider-error", True)]
    + [(500, "provider-error", True), (503, "provider-error", True)],
)
@pytest.mark.parametrize("wire_format", ["openai", "anthropic"])
async def test_http_errors_are_classified_with_the_providers_message_and_never_the_key(
    api: FakeAPI, status: int, code: str, retryable: bool, wire_format: str
) -> None:
    message = f"Bad key {KEY} or model. " + "x" * 2000
    body = (
        {"error": {"message": message}} if wire_format == "openai" else {"type": "error", "error": {"message": message}}
    )
    api.reply(body, status=status)
    client = (
        OpenAIChatClient(base_url=api.base, api_key=KEY, name="p")
        if wire_format == "openai"
        else AnthropicClient(base_url=api.base, api_key=KEY, name="p")
    )
    with pytest.raises(ProviderError) as caught:
        await client.complete(ModelRequest("m", "", (Message("user", "hi"),)))
    err = caught.value
    assert (err.code, err.retryable, err.http_status, err.status) == (code, retryable, status, status)
    assert "Bad key [redacted] or model" in err.message and KEY not in err.message
    assert len(err.message) < 600


async def test_a_refused_connection_and_a_read_timeout_are_retryable_provider_errors(api: FakeAPI) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with pytest.raises(ProviderError) as caught:
        await OpenAIChatClient(base_url=f"http://127.0.0.1:{closed_port}").complete(ModelRequest("m", "", ()))
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("provider-error", True, None)
    api.delay_s = 1.0
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(5.0, read=0.1)) as quick:
        with pytest.raises(ProviderError) as caught:
            await AnthropicClient(base_url=api.base, http=quick).complete(ModelRequest("m", "", ()))
    assert (caught.value.code, caught.value.retryable) == ("provider-error", True)
    assert "timed out" in caught.value.message


async def test_a_redirect_is_not_followed_so_the_key_stays_with_the_configured_host(api: FakeAPI) -> None:
    async with serve_fake() as elsewhere:
        api.replies.append(Response(status_code=307, headers={"location": f"{elsewhere.base}/v1/messages"}))
        with pytest.raises(ProviderError) as caught:
            await AnthropicClient(base_url=api.base, api_key=KEY).complete(ModelRequest("m", "", ()))
        assert elsewhere.seen == []
    assert len(api.seen) == 1
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("config-error", False, 307)


async def test_a_reply_that_is_not_json_or_has_no_choice_is_a_provider_error(api: FakeAPI) -> None:
    api.replies.append(PlainTextResponse("<html>gateway</html>"))
    api.reply({"error": {"message": "upstream overloaded", "code": 502}})
    api.reply({"error": {"message": "no such model", "code": 404}})
    client = OpenAIChatClient(base_url=api.base)
    request = ModelRequest("m", "", ())
    outcomes: list[tuple[str, int | None]] = []
    for _ in range(3):
        with pytest.raises(ProviderError) as caught:
            await client.complete(request)
        outcomes.append((caught.value.code, caught.value.http_status))
    assert outcomes == [("provider-error", 200), ("provider-error", 502), ("config-error", 404)]


async def test_the_shared_http_client_has_explicit_timeouts_and_follows_no_redirects() -> None:
    shared = wire.shared_http_client()
    assert shared is wire.shared_http_client()
    assert shared.follow_redirects is False
    assert (shared.timeout.connect, shared.timeout.read) == (10.0, 300.0)


async def test_usage_adds_up_and_serialises() -> None:
    total = Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40)
    assert total.to_json() == {"input": 11, "output": 22, "cacheRead": 33, "cacheWrite": 44, "total": 110}


# -- scripted -------------------------------------------------------------------------------------------------


def ask(brief: str, turns_done: int = 0, context_key: str = "") -> ModelRequest:
    messages: list[Message] = [Message("user", brief)]
    for i in range(turns_done):
        messages += [Message("assistant", f"turn {i}"), Message("user", "go on")]
    return ModelRequest("scripted", "", tuple(messages), context_key=context_key)


SCRIPT = {
    "rules": [
        {
            "when": "research",
            "turns": [
                {"text": "Searching.", "toolCalls": [{"name": "read", "input": {"address": "~/a"}}, {"name": "plan"}]},
                {"toolCalls": [{"name": "read", "input": {}, "id": "mine"}], "usage": {"input": 5, "output": 7}},
                "Done researching.",
            ],
        },
        {"when": "flaky", "turns": [{"error": {"status": 503, "message": "overloaded"}, "times": 2, "text": "ok"}]},
        {
            "when": "broken",
            "turns": [{"error": {"status": 401, "message": "bad key"}}, {"error": {"message": "reset"}}],
        },
        {"when": "slow", "turns": [{"text": "late", "delayMs": 50}]},
    ],
    "replies": ["default"],
}


async def test_scripted_replies_follow_the_brief_and_the_turn_and_repeat_the_last() -> None:
    client = ScriptedClient(SCRIPT)
    first = await client.complete(ask("Do some research on X"))
    assert first == ModelResponse(
        "Searching.",
        (ToolCall("call-0-0", "read", {"address": "~/a"}), ToolCall("call-0-1", "plan", {})),
        Usage(),
        stop_reason="tool_use",
        model="scripted",
    )
    second = await client.complete(ask("Do some research on X", 1))
    assert second.tool_calls == (ToolCall("mine", "read", {}),) and second.usage == Usage(5, 7)
    assert (await client.complete(ask("Do some research on X", 2))).text == "Done researching."
    assert (await client.complete(ask("Do some research on X", 9))).text == "Done researching."
    # Another conversation (as a parallel child's would be) starts at its own first turn.
    assert (await client.complete(ask("Something else", 3))).text == "default"
    assert (await client.complete(ask("research again"))).text == "Searching."


async def test_scripted_error_replies_raise_classified_errors_and_times_lets_a_retry_succeed() -> None:
    client = ScriptedClient(SCRIPT)
    for _ in range(2):
        with pytest.raises(ProviderError) as caught:
            await client.complete(ask("flaky job", context_key="s1"))
        assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("provider-error", True, 503)
    # A new client (a retried run builds one) continues the count; another session counts on its own.
    assert (await ScriptedClient(SCRIPT).complete(ask("flaky job", context_key="s1"))).text == "ok"
    with pytest.raises(ProviderError):
        await client.complete(ask("flaky job", context_key="s2"))
    with pytest.raises(ProviderError) as caught:
        await client.complete(ask("broken"))
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("config-error", False, 401)
    with pytest.raises(ProviderError) as caught:
        await client.complete(ask("broken", 1))
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("provider-error", True, None)


async def test_scripted_delay_waits_before_replying() -> None:
    start = anyio.current_time()
    assert (await ScriptedClient(SCRIPT).complete(ask("slow"))).text == "late"
    assert anyio.current_time() - start >= 0.05


async def test_scripted_plain_list_and_replies_forms_and_refusals() -> None:
    for script in (["one", {"text": "two"}], {"replies": ["one", {"text": "two"}]}):
        client = ScriptedClient(script)
        assert [(await client.complete(ask("any", n))).text for n in range(3)] == ["one", "two", "two"]
    with pytest.raises(ProviderError) as caught:
        await ScriptedClient({"rules": [{"when": "only this", "turns": ["x"]}]}).complete(ask("other"))
    assert caught.value.code == "config-error"
    for bad in ([], {"rules": [{"turns": []}]}, [{"toolCalls": [{"input": {}}]}], {"replies": ["x"], "extra": 1}):
        with pytest.raises(ProviderError) as caught:
            ScriptedClient(bad)
        assert caught.value.code == "config-error"


async def test_the_scripted_provider_reads_its_file_and_without_one_says_it_has_no_script(
    tmp_path: Path, open_harness: Callable[..., Harness]
) -> None:
    script = tmp_path / "script.json"
    rules = {"rules": [{"when": "hello", "turns": ["Hi there."]}], "replies": ["Pardon?"]}
    script.write_text(json.dumps(rules), encoding="utf-8")
    h = open_harness(demo={"type": "scripted", "file": str(script)})
    demo = await open_client(h, "demo")
    assert [(await demo.complete(ask(brief))).text for brief in ("hello world", "bye")] == ["Hi there.", "Pardon?"]
    assert (await (await open_client(h, "scripted")).complete(ask("anything"))).text == NO_SCRIPT_TEXT
    script.write_text("not json", encoding="utf-8")
    with pytest.raises(ProviderError) as caught:
        client_for(h, "demo")
    assert caught.value.code == "config-error"


# -- sampling and the choice of client ------------------------------------------------------------------------


@dataclass
class FakeSampler:
    fail_with: BaseException | None = None
    delay_s: float = 0.0
    seen: list[ModelRequest] = field(default_factory=list[ModelRequest])

    async def create_message(self, request: ModelRequest) -> ModelResponse:
        self.seen.append(request)
        await anyio.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        return ModelResponse("sampled", (ToolCall("s1", "read", {}),), Usage(1, 1))

    def unavailable(self, *, detached: bool) -> str | None:
        return None


async def test_sampling_forwards_to_the_sampler_and_maps_its_failures(open_harness: Callable[..., Harness]) -> None:
    h = open_harness()
    with pytest.raises(ProviderError) as caught:
        client_for(h, "sampling")
    assert caught.value.code == "config-error" and NO_SAMPLER in caught.value.message
    sampler = FakeSampler()
    client = client_for(h, "sampling", sampler=sampler)
    request = ask("brief")
    assert (await client.complete(request)).text == "sampled" and sampler.seen == [request]
    sampler.fail_with = RuntimeError("client went away")
    with pytest.raises(ProviderError) as caught:
        await client.complete(request)
    assert (caught.value.code, caught.value.retryable) == ("provider-error", True)
    sampler.fail_with = ProviderError("config-error", "the user declined")
    with pytest.raises(ProviderError) as caught:
        await client.complete(request)
    assert caught.value is sampler.fail_with
    sampler.fail_with, sampler.delay_s = None, 1.0
    with pytest.raises(ProviderError) as caught:
        await SamplingClient(sampler, timeout_s=0.05).complete(request)
    assert (caught.value.code, caught.value.retryable) == ("provider-error", True)


async def test_client_for_chooses_by_type_and_reports_missing_providers_and_keys_as_config_errors(
    open_harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    h = open_harness(
        claude={"type": "anthropic"},
        gem={"type": "google", "model": "gemini-2.5-flash"},
        router={"type": "openrouter"},
        llama={"type": "ollama"},
    )
    for name in ("nope", "claude", "gem"):
        with pytest.raises(ProviderError) as caught:
            client_for(h, name)
        assert (caught.value.code, caught.value.retryable) == ("config-error", False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    assert (
        repr(client_for(h, "claude")) == "AnthropicClient(name='claude', url='https://api.anthropic.com/v1/messages')"
    )
    gem = client_for(h, "gem")
    assert isinstance(gem, OpenAIChatClient) and KEY not in repr(gem)
    assert "generativelanguage.googleapis.com/v1beta/openai/chat/completions" in repr(gem)
    assert isinstance(client_for(h, "router"), OpenAIChatClient)
    assert "127.0.0.1:11434/v1/chat/completions" in repr(client_for(h, "llama"))
