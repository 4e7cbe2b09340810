"""The provider-neutral shape of one model request and its reply, the error a request can end in, and the seams.

Every model client (OpenAI chat completions, Anthropic messages, MCP sampling, scripted) takes a `ModelRequest`
and returns a `ModelResponse`; the agent loop never sees a wire format. The HTTP leg the hosted clients share
(one pooled client per process, explicit timeouts, no redirects, status → error classification) lives at the end.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx2
from anyio.lowlevel import EventLoopToken, current_token

from mcp_harness.errors import HarnessError
from mcp_harness.reasoning import REASONING_LEVELS

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]
    """Parsed JSON object; `{}` when the provider sent something that is not one (kept in `raw_arguments`)."""
    raw_arguments: str | None = None


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image a message carries to a model that accepts images (`models/vision.py` says which do)."""

    mime_type: str
    data: bytes = field(repr=False)
    label: str = ""
    """What the image is (`attachment photo.png`, `~/memory/chart.png`), for a model or a note that names it."""


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation turn. The system prompt is not a message: it travels in `ModelRequest.system`."""

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    """Assistant only."""
    tool_call_id: str | None = None
    """Tool only: the call this is the result of."""
    name: str | None = None
    """Tool only: the tool's name."""
    is_error: bool = False
    """Tool only: the call failed (Anthropic marks the result; other wire formats rely on the content)."""
    reasoning: tuple[dict[str, Any], ...] = ()
    """Assistant only: opaque provider reasoning blocks to send back verbatim (Anthropic `thinking` blocks carry a
    signature the API checks during a tool loop); copy `ModelResponse.reasoning` here."""
    images: tuple[ImagePart, ...] = ()
    """User and tool messages: images sent with the text (image parts; a tool result's follow it on OpenAI's wire)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call; `input_schema` is a JSON Schema object."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts. `input` excludes cache reads and writes, so `total` counts every token once."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "total": self.total,
        }


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs."""

    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    reasoning_level: str | None = None
    """One of `mcp_harness.reasoning.REASONING_LEVELS`, already validated against the model; None sends none."""
    max_output_tokens: int | None = None
    context_key: str = ""
    """A stable id of the conversation (the session id)."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The model's reply: text, the tool calls it asked for, and what it cost."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    stop_reason: str | None = None
    """As the provider said it (`stop`, `tool_calls`, `length`, `end_turn`, `tool_use`, `max_tokens`, …)."""
    model: str | None = None
    reasoning: tuple[dict[str, Any], ...] = ()
    """Opaque reasoning blocks to keep on the assistant `Message` (see `Message.reasoning`)."""


def nearest_level(levels: tuple[str, ...], level: str) -> str:
    """`level` if the model takes it, else the closest level it does take (`xhigh` on a model topping out at
    `high` becomes `high`); the agent definition was validated, so this only bridges a model changed since."""
    if level in levels or level not in REASONING_LEVELS or not levels:
        return level
    wanted = REASONING_LEVELS.index(level)
    return min(levels, key=lambda lv: abs(REASONING_LEVELS.index(lv) - wanted))


ProviderErrorCode = Literal["provider-error", "config-error"]


class ProviderError(HarnessError):
    """A model request failed (HARNESS §8).

    `provider-error` is the provider's or the network's fault and worth retrying (HTTP ≥ 500, 429, timeouts);
    `config-error` is ours to fix (a bad key, an unknown model, a malformed request) and is not retried.
    """

    def __init__(
        self,
        code: ProviderErrorCode,
        message: str,
        *,
        retryable: bool | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self._code: ProviderErrorCode = code
        self.retryable = code == "provider-error" if retryable is None else retryable
        self.http_status = http_status

    # The base class fixes code and status per class; a provider error's depend on what failed.
    @property
    def code(self) -> ProviderErrorCode:  # pyright: ignore[reportIncompatibleVariableOverride]
        return self._code

    @property
    def status(self) -> int:  # pyright: ignore[reportIncompatibleVariableOverride]
        """The provider's HTTP status when there was one, else 502 (upstream failed) or 400 (configuration)."""
        if self.http_status is not None and self.http_status >= 400:
            return self.http_status
        return 502 if self._code == "provider-error" else 400

    @classmethod
    def for_status(cls, status: int, message: str) -> ProviderError:
        """Classify an HTTP status: ≥ 500 and 429 are retryable provider errors, any other is a config error."""
        if status >= 500 or status == 429:
            return cls("provider-error", message, retryable=True, http_status=status)
        return cls("config-error", message, retryable=False, http_status=status)


class ModelClient(Protocol):
    """Sends one request to one provider. Raises `ProviderError` for every failure it can classify."""

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


class Sampler(Protocol):
    """The MCP client's own model, reached through `sampling/createMessage` with tools (implemented by the server).

    It raises `ProviderError` when the client refuses or cannot sample; anything else it raises is treated as a
    transient failure.
    """

    async def create_message(self, request: ModelRequest) -> ModelResponse: ...

    def unavailable(self, *, detached: bool) -> str | None:
        """Why a child that the request being handled spawns now could not reach this model, as a clause to follow
        "which" (`delegate` refuses with it rather than fail later in the run); None when it can, or when nothing here
        says otherwise. `detached`: the child is spawned with `await: false`."""
        ...


# -- the HTTP leg of the hosted clients ------------------------------------------------------------------------

TIMEOUT = httpx2.Timeout(connect=10.0, read=300.0, write=60.0, pool=60.0)
"""Read is long because a reasoning model may think for minutes before its first byte."""
MAX_ERROR_CHARS = 500

_shared: tuple[httpx2.AsyncClient, EventLoopToken] | None = None


def shared_http_client() -> httpx2.AsyncClient:
    """The one pooled HTTP client of the process, created on first use. Redirects are never followed: a
    provider's key must reach only the host it was configured for.

    Pooled connections belong to the event loop that opened them, so a new loop (a second `anyio.run`, the next
    test) gets a new client rather than sockets of a loop that is gone.
    """
    global _shared
    loop = current_token()
    if _shared is None or _shared[0].is_closed or _shared[1] != loop:
        _shared = (httpx2.AsyncClient(timeout=TIMEOUT, follow_redirects=False), loop)
    return _shared[0]


async def aclose_shared_http_client() -> None:
    """Close the pooled client (server shutdown, end of a test); the next request opens a new one."""
    global _shared
    shared, _shared = _shared, None
    if shared is not None and shared[1] == current_token():
        await shared[0].aclose()


async def post_json(
    http: httpx2.AsyncClient | None,
    url: str,
    body: dict[str, Any],
    *,
    headers: dict[str, str],
    provider: str,
    secret: str | None,
) -> dict[str, Any]:
    """POST `body` as JSON and return the JSON object answered.

    Raises:
        ProviderError: classified by status (see `ProviderError.for_status`); network failures and timeouts are
            retryable provider errors; a redirect or a body that is not a JSON object is reported, never followed.
    """
    client = http or shared_http_client()
    try:
        response = await client.post(url, json=body, headers=headers, follow_redirects=False)
    except httpx2.TimeoutException as exc:
        raise ProviderError("provider-error", f"{provider}: the request timed out ({type(exc).__name__}).") from exc
    except httpx2.RequestError as exc:  # transport failures, and a body that cannot be decoded
        raise ProviderError("provider-error", f"{provider}: cannot reach {url}: {_clean(str(exc), secret)}") from exc
    status = response.status_code
    if 300 <= status < 400:
        where = response.headers.get("location", "elsewhere")
        raise ProviderError(
            "config-error",
            f"{provider}: {url} answered {status}, redirecting to {_clean(where, secret)}; redirects are not "
            "followed, so that the key stays with the configured host. Fix the provider's base URL.",
            http_status=status,
        )
    if status >= 400:
        detail = _clean(_error_message(response), secret)
        raise ProviderError.for_status(status, f"{provider}: HTTP {status}: {detail}")
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProviderError("provider-error", f"{provider}: the reply is not JSON.", http_status=status) from exc
    if not isinstance(data, dict):
        raise ProviderError("provider-error", f"{provider}: the reply is not a JSON object.", http_status=status)
    return data


def _error_message(response: httpx2.Response) -> str:
    """Both OpenAI and Anthropic put the useful text at `error.message`; fall back to the raw body."""
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
    return response.text


def _clean(text: str, secret: str | None) -> str:
    """Bound a provider's text for a message, and take out the key should the provider echo it."""
    if secret:
        text = text.replace(secret, "[redacted]")
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
