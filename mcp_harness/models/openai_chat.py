"""The OpenAI chat-completions wire format: OpenAI itself, OpenRouter, Ollama, Gemini's OpenAI-compatible endpoint
and any `custom` server that speaks it.

Reasoning levels (HARNESS §2) become `reasoning_effort`, for the provider types `model_reasoning_support` knows
(openai, google); every other type gets none, because a compatible server may refuse a field it does not know:

- a level the model accepts is sent as it is;
- a level it does not (say `xhigh` on gpt-5.1) is clamped to the nearest one it does (`wire.nearest_level`);
- no level sends `"none"` where the model takes it (gpt-5.1 and later reason by default otherwise), and nothing
  elsewhere.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import httpx2

from mcp_harness.models.vision import images_intro, openai_image_parts
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


class OpenAIChatClient:
    """POSTs `<base_url>/chat/completions`, with the key as a bearer token when there is one."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None = None,
        provider_type: str = "custom",
        name: str = "",
        default_model: str | None = None,
        http: httpx2.AsyncClient | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._type = provider_type
        self._name = name or provider_type
        self._default_model = default_model
        self._http = http

    def __repr__(self) -> str:
        return f"OpenAIChatClient(name={self._name!r}, url={self._url!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        model = request.model or self._default_model
        if not model:
            raise ProviderError("config-error", f"{self._name}: no model given, and the provider names no default.")
        body = chat_body(request, model, self._type)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        logger.debug("chat completion: provider %s model %s, %d messages", self._name, model, len(request.messages))
        data = await post_json(self._http, self._url, body, headers=headers, provider=self._name, secret=self._api_key)
        return parse_chat_reply(data, self._name)


def reasoning_effort(provider_type: str, model: str, level: str | None) -> str | None:
    """The `reasoning_effort` to send for `level`, or None to send none (see the module docstring)."""
    support = model_reasoning_support(provider_type, model)
    if support is None:
        return None
    if level is None:
        return "none" if support.supports_effort_none else None
    return nearest_level(support.levels, level)


def chat_body(request: ModelRequest, model: str, provider_type: str) -> dict[str, Any]:
    """The JSON body of a chat-completions request."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    held: list[dict[str, Any]] = []
    for m in request.messages:
        if held and m.role != "tool":  # tool messages must follow their call unbroken: their images come after
            messages.extend(held)
            held = []
        messages.append(_message(m))
        if m.role == "tool" and m.images:
            intro = images_intro(m.images, m.tool_call_id)
            held.append({"role": "user", "content": openai_image_parts(m.images, intro)})
    messages.extend(held)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    if request.max_output_tokens is not None:
        # OpenAI refuses `max_tokens` on its reasoning models; the compatible servers know only `max_tokens`.
        key = "max_completion_tokens" if provider_type == "openai" else "max_tokens"
        body[key] = request.max_output_tokens
    effort = reasoning_effort(provider_type, model, request.reasoning_level)
    if effort is not None:
        body["reasoning_effort"] = effort
    return body


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    # The parsed form, never `raw_arguments`: a server may refuse a history holding invalid JSON.
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
                }
                for c in m.tool_calls
            ],
        }
    if m.role == "user" and m.images:
        return {"role": "user", "content": openai_image_parts(m.images, m.content or None)}
    return {"role": m.role, "content": m.content}


def parse_chat_reply(data: dict[str, Any], provider: str) -> ModelResponse:
    """A chat-completions reply as a `ModelResponse`.

    Raises:
        ProviderError: the reply holds no choice (OpenRouter reports some upstream failures as a 200 with `error`).
    """
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        if isinstance(error, dict):
            status = error.get("code")
            message = f"{provider}: {str(error.get('message') or 'error')[:500]}"
            if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600:
                raise ProviderError.for_status(status, message)
            raise ProviderError("provider-error", message)
        raise ProviderError("provider-error", f"{provider}: the reply has no choices.")
    choice: dict[str, Any] = choices[0]
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    raw_calls = message.get("tool_calls")
    calls = tuple(_tool_call(c) for c in (raw_calls if isinstance(raw_calls, list) else []) if isinstance(c, dict))
    model = data.get("model")
    return ModelResponse(
        text=_text(message.get("content")),
        tool_calls=calls,
        usage=_usage(data.get("usage")),
        stop_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        model=model if isinstance(model, str) else None,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers answer with content parts
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _tool_call(raw: dict[str, Any]) -> ToolCall:
    function = raw.get("function")
    function = function if isinstance(function, dict) else {}
    name = function.get("name")
    name = name if isinstance(name, str) else ""
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        # Some compatible servers omit ids; the tool result must still name the call it answers.
        call_id = f"call-{uuid.uuid4().hex[:16]}"
    args = function.get("arguments")
    if isinstance(args, dict):  # Ollama has been seen sending the object itself
        return ToolCall(call_id, name, args)
    raw_args = args if isinstance(args, str) else json.dumps(args)
    try:
        parsed = json.loads(raw_args) if raw_args.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(call_id, name, parsed)
    return ToolCall(call_id, name, {}, raw_arguments=raw_args)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt = _int(raw.get("prompt_tokens"))
    details = raw.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    # OpenAI counts cached tokens inside prompt_tokens; Usage.input excludes them.
    return Usage(input=max(prompt - cached, 0), output=_int(raw.get("completion_tokens")), cache_read=cached)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
