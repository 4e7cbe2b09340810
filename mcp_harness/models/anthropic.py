"""The Anthropic Messages API (`POST /v1/messages`).

Reasoning levels (HARNESS §2) become extended thinking, `thinking: {type: "enabled", budget_tokens: N}`, on the
models `model_reasoning_support` says take it, with the budget from `THINKING_BUDGETS`. Temperature is never set
(thinking forbids it). Without an explicit `max_output_tokens` the budget is added on top of `DEFAULT_MAX_TOKENS`;
with one, the budget is capped at half of it and thinking is left off when that falls under the API's 1024 minimum.

Thinking is also left off for a request whose latest assistant turn called tools but carries no thinking blocks
(a history written before thinking was switched on, or one that lost them): the API refuses such a request.

Prompt caching: the system prompt and the last block of the conversation carry `cache_control`, so each turn of
an agent loop reads the previous turn's prefix from the cache instead of paying for it again.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2

from mcp_harness.models.vision import anthropic_image_blocks
from mcp_harness.models.wire import (
    Message,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
    Usage,
    nearest_level,
    post_json,
)
from mcp_harness.reasoning import model_reasoning_support

logger = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
"""The API requires `max_tokens`; this is the answer's allowance when the request names none."""
MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 8192, "high": 16384, "xhigh": 32768}
"""Thinking tokens per reasoning level."""
_CACHE = {"type": "ephemeral"}
_CACHEABLE = frozenset({"text", "tool_use", "tool_result"})


class AnthropicClient:
    """POSTs `<base_url>/v1/messages` with `x-api-key`. `base_url` is the pinned API root outside tests."""

    def __init__(
        self,
        *,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        name: str = "anthropic",
        default_model: str | None = None,
        http: httpx2.AsyncClient | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._api_key = api_key
        self._name = name
        self._default_model = default_model
        self._http = http

    def __repr__(self) -> str:
        return f"AnthropicClient(name={self._name!r}, url={self._url!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        model = request.model or self._default_model
        if not model:
            raise ProviderError("config-error", f"{self._name}: no model given, and the provider names no default.")
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        body = messages_body(request, model)
        logger.debug("messages request: provider %s model %s, %d messages", self._name, model, len(request.messages))
        data = await post_json(self._http, self._url, body, headers=headers, provider=self._name, secret=self._api_key)
        return parse_messages_reply(data)


def thinking_budget(model: str, request: ModelRequest) -> int | None:
    """Thinking tokens for this request, or None for no thinking (see the module docstring)."""
    support = model_reasoning_support("anthropic", model)
    if support is None or request.reasoning_level is None:
        return None
    budget = THINKING_BUDGETS.get(nearest_level(support.levels, request.reasoning_level))
    if budget is None:
        return None
    if request.max_output_tokens is not None:
        budget = min(budget, request.max_output_tokens // 2)
        if budget < MIN_THINKING_BUDGET:
            return None
    last = next((m for m in reversed(request.messages) if m.role == "assistant"), None)
    if last is not None and last.tool_calls and not last.reasoning:
        logger.debug("thinking left off: the latest tool-calling assistant turn has no thinking blocks")
        return None
    return budget


def messages_body(request: ModelRequest, model: str) -> dict[str, Any]:
    """The JSON body of a Messages API request."""
    budget = thinking_budget(model, request)
    if request.max_output_tokens is not None:
        max_tokens = request.max_output_tokens
    else:
        max_tokens = DEFAULT_MAX_TOKENS + (budget or 0)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
    body["messages"] = _conversation(request.messages)
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
        ]
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return body


def _conversation(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Messages in the API's alternating form: tool results and a following user text share one user message."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue  # the API refuses empty content; an empty turn says nothing anyway
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if out:
        last = out[-1]["content"][-1]
        if last.get("type") in _CACHEABLE:
            out[-1]["content"][-1] = {**last, "cache_control": _CACHE}
    return out


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        content: Any = m.content
        if m.images:  # a tool result may hold images itself on this wire
            content = [{"type": "text", "text": m.content or "(image)"}, *anthropic_image_blocks(m.images)]
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": content}
        if m.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = [dict(b) for b in m.reasoning] if m.role == "assistant" else []
    if m.content.strip():
        blocks.append({"type": "text", "text": m.content})
    if m.role == "user":
        blocks.extend(anthropic_image_blocks(m.images))
    if m.role == "assistant":
        blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls)
    return blocks


def parse_messages_reply(data: dict[str, Any]) -> ModelResponse:
    """A Messages API reply as a `ModelResponse`."""
    content = data.get("content")
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            calls.append(_tool_call(block))
        elif kind in ("thinking", "redacted_thinking"):
            reasoning.append(block)
    stop = data.get("stop_reason")
    model = data.get("model")
    return ModelResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=_usage(data.get("usage")),
        stop_reason=stop if isinstance(stop, str) else None,
        model=model if isinstance(model, str) else None,
        reasoning=tuple(reasoning),
    )


def _tool_call(block: dict[str, Any]) -> ToolCall:
    call_id, name, args = block.get("id"), block.get("name"), block.get("input")
    call_id = call_id if isinstance(call_id, str) else ""
    name = name if isinstance(name, str) else ""
    if isinstance(args, dict):
        return ToolCall(call_id, name, args)
    return ToolCall(call_id, name, {}, raw_arguments=json.dumps(args))


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    return Usage(
        input=_int(raw.get("input_tokens")),
        output=_int(raw.get("output_tokens")),
        cache_read=_int(raw.get("cache_read_input_tokens")),
        cache_write=_int(raw.get("cache_creation_input_tokens")),
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
