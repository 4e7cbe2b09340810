"""What a verb receives and returns. Verbs are plain functions of (context, input); they know nothing of MCP."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_harness.errors import BadRequest

if TYPE_CHECKING:
    from mcp_harness.models.wire import ImagePart
    from mcp_harness.scope import Scope
    from mcp_harness.services import Services
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.sessions import Actor


@dataclass(frozen=True, kw_only=True, slots=True)
class VerbContext:
    """Who is calling: the agent whose world the verb acts on, the session it is logged in, and the actor."""

    services: Services
    """The stores and services a verb may reach (`services.py`), supplied by the composition root."""
    agent: AgentRecord
    session_id: str | None
    """None only where no session exists yet (a resource read before any verb call)."""
    actor: Actor
    scope: Scope
    """Whom the caller acts for (`scope.py`): every session, run or agent a verb names is checked against it."""
    progress: Progress | None = None
    """Where long-running work reports a short status line (the server turns it into progress notifications)."""
    call_id: str | None = None
    """The logged `tool_call` id of this call (delegate links its child to it)."""
    run_id: str | None = None
    """The run executing this call, for calls the server's own agent loop makes (None for MCP clients)."""
    prepared: Any = None
    """What the verb's blocking look-up found in the hop that logged the call (`harness.ASYNC_PREPARE`), so the
    verb need not leave the event loop again for it; None when nothing was prepared."""


Progress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class VerbResult:
    """A verb's answer: `data` is the structured result, `text` its markdown rendering, and `images` any pictures
    the answer shows (the MCP front sends them as image content; never logged, `data` says what they were)."""

    data: dict[str, Any]
    text: str
    images: tuple[ImagePart, ...] = ()
    logged: dict[str, Any] | None = None
    """What the transcript keeps instead of `data`, when the answer shows something only once (a webhook's
    secret): the caller sees it now, and no later turn, replay or log reads it back."""
    meta: dict[str, Any] | None = None
    """The MCP result's `_meta` (plain JSON; e.g. MCP Apps' `{"ui": {"resourceUri": "ui://…"}}`), passed through by
    the front and never logged or shown to a model."""
    content: tuple[dict[str, Any], ...] | None = None
    """An upstream MCP server's content blocks as JSON (text, image, audio, resource, resource_link), sent unchanged
    instead of `text` and `images` when set; `text` stays the transcript's and a model's rendering of them."""
    is_error: bool = False
    """The answer is a failure reported as a result (an upstream tool's `isError`), not a harness refusal."""

    @classmethod
    def of(cls, data: dict[str, Any], body: str | None = None, *, fmt: str = "markdown") -> VerbResult:
        """Render `data` as markdown (summary, then `body`) or, for `format: "json"`, as JSON text."""
        if fmt == "json":
            return cls(data, json.dumps(data, indent=2, ensure_ascii=False))
        summary = str(data.get("summary", ""))
        text = summary if body is None else (f"{summary}\n\n{body}" if summary else body)
        return cls(data, text)


def touch_expand(name: str, contract: str, errors: list[str]) -> VerbResult:
    """A contract miss (HARNESS §5): the contract and what was wrong, as an ordinary result, never an error."""
    data = {
        "summary": f"Input for {name} did not match its contract — here it is; call again with valid input.",
        "contract": contract,
        "validationErrors": errors,
    }
    body = contract + "\n\n## Validation errors\n\n" + "\n".join(f"- {e}" for e in errors)
    return VerbResult.of(data, body)


def options_of(arguments: dict[str, Any]) -> dict[str, Any]:
    """The `options` object of a verb input (absent means empty)."""
    opts = arguments.get("options")
    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise BadRequest("options must be an object.")
    return dict(opts)  # pyright: ignore[reportUnknownArgumentType]


def refuse_unknown_options(form: str, options: dict[str, Any], allowed: tuple[str, ...], hint: str = "") -> None:
    """400 naming every unknown option key and the supported set (HARNESS §12 `assertKnownWriteOptions`)."""
    unknown = [k for k in options if k not in allowed]
    if not unknown:
        return
    keys = ", ".join(f'"{k}"' for k in unknown)
    plural = "s" if len(unknown) > 1 else ""
    supported = ", ".join(allowed) or "(none)"
    message = f"{form} does not understand option{plural} {keys}. Supported options: {supported}."
    retired = " ".join(RETIRED_OPTION_HINTS[k] for k in unknown if k in RETIRED_OPTION_HINTS)
    raise BadRequest(" ".join(part for part in (message, retired, hint) if part))


RETIRED_OPTION_HINTS = {
    "title": "A document has no separate title — its name lives in metadata.name; pass {name} (or metadata: {name}).",
    "dryRun": "dryRun is a top-level field on the write call itself, next to address and content.",
}
"""Spellings that used to work or that models reach for, each with the fix (HARNESS §12)."""
