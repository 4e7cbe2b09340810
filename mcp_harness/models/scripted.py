"""The scripted provider: deterministic canned replies, for tests and demos.

A reply is chosen by (conversation, turn) and never by arrival order, so parallel child sessions sharing one
scripted provider each get their own script, and a retried request gets the same reply again:

- the conversation is named by its first user message (the brief): the first rule whose `when` occurs in it
  applies, and a rule without `when` matches any conversation;
- the turn is the number of assistant messages already in the request; past a rule's last turn, the last reply
  repeats.

The script (a provider's `file`, or a value given to `ScriptedClient` directly) is JSON, one of:

    [reply, …]                                   one rule matching every conversation
    {"replies": [reply, …]}                      the same
    {"rules": [{"when"?: str, "turns": [reply, …]}, …], "replies"?: [reply, …]}
                                                 `replies`, if given, is a last rule matching everything

and a reply is a string (its text) or an object:

    {"text"?: str, "toolCalls"?: [{"name": str, "input"?: {…}, "id"?: str}], "delayMs"?: int,
     "usage"?: {"input"?: n, "output"?: n, "cacheRead"?: n, "cacheWrite"?: n}, "stopReason"?: str,
     "error"?: {"status"?: int, "message"?: str}, "times"?: int}

Tool call ids default to `call-<turn>-<index>`. `error` raises the `ProviderError` its HTTP status would (no
status: a network failure, retryable). With `times: n` the error is raised for the first n requests of that turn
in that conversation (counted per `context_key`, across clients, because a retried run builds a new one), and the
reply's text and tool calls are given after that.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mcp_harness.models.wire import ModelRequest, ModelResponse, ProviderError, ToolCall, Usage

logger = logging.getLogger(__name__)

MAX_SCRIPT_BYTES = 4 * 1024 * 1024
NO_SCRIPT_TEXT = (
    "This is the scripted model provider, and it has no script, so this is its only reply. Give an agent a real "
    "model provider (`mcp-harness provider add`), or give the scripted provider a file of replies."
)
_MAX_COUNTED = 4096


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class _CallSpec(_Spec):
    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)


class _UsageSpec(_Spec):
    input: int = Field(default=0, ge=0)
    output: int = Field(default=0, ge=0)
    cache_read: int = Field(default=0, ge=0, alias="cacheRead")
    cache_write: int = Field(default=0, ge=0, alias="cacheWrite")


_NO_USAGE = _UsageSpec()
"""A reply without `usage` (frozen): built once, not for every reply."""


class _ErrorSpec(_Spec):
    status: int | None = Field(default=None, ge=100, le=599)
    message: str = "scripted provider error"


class _Reply(_Spec):
    text: str = ""
    tool_calls: tuple[_CallSpec, ...] = Field(default=(), alias="toolCalls")
    delay_ms: int = Field(default=0, ge=0, le=600_000, alias="delayMs")
    usage: _UsageSpec | None = None
    stop_reason: str | None = Field(default=None, alias="stopReason")
    error: _ErrorSpec | None = None
    times: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _text_shorthand(cls, value: Any) -> Any:
        return {"text": value} if isinstance(value, str) else value


class _Rule(_Spec):
    when: str | None = None
    turns: tuple[_Reply, ...] = Field(min_length=1)


class _Script(_Spec):
    rules: tuple[_Rule, ...] = ()
    replies: tuple[_Reply, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _plain_list(cls, value: Any) -> Any:
        return {"replies": value} if isinstance(value, list) else value

    def all_rules(self) -> tuple[_Rule, ...]:
        if self.replies:
            return (*self.rules, _Rule(turns=self.replies))
        return self.rules


_attempts: OrderedDict[tuple[str, str, int], int] = OrderedDict()
"""Requests seen per (script, conversation, turn), for `times`. Bounded: the oldest conversations are forgotten."""


def _count_attempt(key: tuple[str, str, int]) -> int:
    """How many requests of this key came before this one."""
    seen = _attempts.pop(key, 0)
    _attempts[key] = seen + 1
    while len(_attempts) > _MAX_COUNTED:
        _attempts.popitem(last=False)
    return seen


class ScriptedClient:
    """Replies from a script (see the module docstring); None gives the one reply `NO_SCRIPT_TEXT`.

    Raises:
        ProviderError: (config-error, on construction) the script is not of the accepted form.
    """

    def __init__(self, script: Any = None, *, name: str = "scripted") -> None:
        self._name = name
        raw = [NO_SCRIPT_TEXT] if script is None else script
        try:
            parsed = _Script.model_validate(raw)
        except ValidationError as exc:
            raise ProviderError(
                "config-error", f"{name}: the script is not valid: {_first_error(exc)} (format: models/scripted.py)."
            ) from exc
        self._rules = parsed.all_rules()
        if not self._rules:
            raise ProviderError("config-error", f"{name}: the script has no replies.")
        self._fingerprint = hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @classmethod
    def from_file(cls, path: Path, *, name: str = "scripted") -> ScriptedClient:
        """Load a script file. Blocks: call it off the event loop.

        Raises:
            ProviderError: (config-error) the file cannot be read, is too large, or is not a valid script.
        """
        try:
            with path.open("rb") as f:
                data = f.read(MAX_SCRIPT_BYTES + 1)
        except OSError as exc:
            raise ProviderError("config-error", f"{name}: cannot read the script {path}: {exc.strerror}.") from exc
        if len(data) > MAX_SCRIPT_BYTES:
            raise ProviderError("config-error", f"{name}: the script {path} is over {MAX_SCRIPT_BYTES} bytes.")
        try:
            script = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProviderError("config-error", f"{name}: the script {path} is not valid JSON ({exc}).") from exc
        return cls(script, name=name)

    def __repr__(self) -> str:
        return f"ScriptedClient(name={self._name!r}, rules={len(self._rules)})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        brief = next((m.content for m in request.messages if m.role == "user"), "")
        rule = next((r for r in self._rules if r.when is None or r.when in brief), None)
        if rule is None:
            raise ProviderError(
                "config-error", f"{self._name}: no rule of the script matches the brief {_preview(brief)!r}."
            )
        turn = sum(1 for m in request.messages if m.role == "assistant")
        reply = rule.turns[min(turn, len(rule.turns) - 1)]
        failing = reply.error is not None
        if reply.error is not None and reply.times is not None:
            seen = _count_attempt((self._fingerprint, request.context_key or brief, turn))
            failing = seen < reply.times
        if reply.delay_ms:
            await anyio.sleep(reply.delay_ms / 1000)
        if failing and reply.error is not None:
            if reply.error.status is None:
                raise ProviderError("provider-error", f"{self._name}: {reply.error.message}")
            raise ProviderError.for_status(reply.error.status, f"{self._name}: {reply.error.message}")
        calls = tuple(
            ToolCall(c.id or f"call-{turn}-{i}", c.name, dict(c.input)) for i, c in enumerate(reply.tool_calls)
        )
        u = reply.usage or _NO_USAGE
        return ModelResponse(
            text=reply.text,
            tool_calls=calls,
            usage=Usage(u.input, u.output, u.cache_read, u.cache_write),
            stop_reason=reply.stop_reason or ("tool_use" if calls else "end_turn"),
            model=request.model or "scripted",
        )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top)"
    return f"{where}: {err['msg']}"


def _preview(text: str) -> str:
    return text if len(text) <= 80 else text[:79] + "…"
