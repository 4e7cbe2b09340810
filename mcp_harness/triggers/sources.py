"""What a trigger may be: its source and continuation shapes, their limits and refusals, and the one-line `when`
(HARNESS §10 `normalizeAgentTriggerSource`, `:7480-7606`).

A trigger body is checked once, when it is written, and stored normalized: resources canonical (`hm://<account>/
<path>`, no version or fragment), account lists deduplicated, days of the week sorted, `HH:MM` zero-padded, a
`newThread` continuation stored as None. Every refusal names the field, what was wrong and what is accepted.
Unknown fields are refused by name, so a misspelt filter never silently matches everything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.ids import ACCEPTED_FORM, parse_hm_id
from mcp_harness.jsondepth import MAX_INPUT_DEPTH, depth_exceeds

MAX_RESOURCE_BYTES = 2048
MAX_SHORT_BYTES = 256
MAX_MENTIONED = 32
MAX_EVENT_TYPES = 32
MAX_PROMPT_BYTES = 64 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_SAFE_INTEGER = 2**53 - 1
MAX_SIGNAL_CHARS = 200
"""What a signal name may be when it is delivered (`runs/signals.py`), checked when the trigger is written."""
MAX_INTERVAL = {"minutes": 10 * 365 * 24 * 60, "hours": 10 * 365 * 24}
"""At most ten years between occurrences: longer is a `once`."""
RUN_STATUSES = ("succeeded", "failed", "canceled")
DAY_NAMES = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
"""`daysOfWeek` counts as JavaScript's `getDay()` does: 0 is Sunday."""

SHAPE = "{source, prompt, enabled?, continuation?}"
SOURCES_ACCEPTED = (
    '{type: "schedule", schedule}, {type: "document-comment", resource, author?}, '
    '{type: "user-mention", mentionedAccounts, resourcePrefix?}, {type: "site-update", resourcePrefix, eventTypes?}, '
    '{type: "run-completed", agentId?, status?, titleMatch?}, {type: "webhook"}'
)
SCHEDULES_ACCEPTED = (
    '{kind: "interval", every, unit: "minutes"|"hours"}, '
    '{kind: "weekly", daysOfWeek: [0-6, 0 = Sunday], timeOfDay: "HH:MM", timezone: IANA name}, '
    '{kind: "once", runAt: epoch ms, timezone?}'
)
CONTINUATIONS_ACCEPTED = '{kind: "newThread"} (the default) or {kind: "wake", signal, runId?, payload?}'

CONTRACT = f"""write ~/triggers/<name> with JSON content (or options.trigger) {SHAPE}; options {{delete: true}} \
removes it.
- source, one of: {SOURCES_ACCEPTED}.
- schedule, one of: {SCHEDULES_ACCEPTED}. A missed period fires once, not once per period.
- prompt: the first message of the thread each firing starts (markdown, required).
- enabled: true (default) or false.
- document-comment, user-mention (an @-mention is a link to hm://<account>, not the text "@name") and \
site-update fire on activity that arrives after the trigger is saved, never on activity you signed yourself.
- webhook: a signed POST to /hooks/<trigger id> on the HTTP server (`serve --http`) fires it, its body the \
activity; the signing secret is in the result of the write that creates it, and shown nowhere else.
- continuation: {CONTINUATIONS_ACCEPTED}. newThread starts a new thread of yours with the prompt and a \
<trigger_context> block describing what fired; wake delivers the signal to a run of yours waiting for it.
Resources are hm:// ids; accounts are account ids. A firing acts with your grants, nothing more."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TriggerSpec:
    """A checked trigger body."""

    source: dict[str, Any]
    prompt: str
    enabled: bool
    continuation: dict[str, Any] | None


def _fields(what: str, raw: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        names = ", ".join(f'"{k}"' for k in unknown)
        raise BadRequest(f"{what} does not take {names}. Accepted fields: {', '.join(allowed)}.")


def _object(what: str, value: object, accepted: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be an object: {accepted}.")
    return value  # pyright: ignore[reportUnknownVariableType]


def utf8_size(what: str, text: str) -> int:
    """The UTF-8 size of `text`; a lone surrogate (JSON can carry one) is refused, since it cannot be stored."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadRequest(f"{what} is not valid Unicode text (it holds a lone surrogate).") from None


def _text(what: str, value: object, limit: int, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{what} must be a non-empty string.")
    text = value.strip()
    if utf8_size(what, text) > limit:
        raise BadRequest(f"{what} is too long: at most {limit} bytes.")
    return text


def _int(what: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{what} must be an integer from {low} to {high}.")
    if isinstance(value, float) and not value.is_integer():  # NaN and the infinities included
        raise BadRequest(f"{what} must be an integer from {low} to {high}.")
    number = int(value)
    if not low <= number <= high:
        raise BadRequest(f"{what} must be an integer from {low} to {high}, not {number}.")
    return number


def _resource(what: str, value: object, *, required: bool = True) -> str | None:
    text = _text(what, value, MAX_RESOURCE_BYTES, required=required)
    if text is None:
        return None
    if "://" not in text:
        raise BadRequest(f"{what} must be an hm:// id ({ACCEPTED_FORM}), not {text!r}.")
    try:
        return parse_hm_id(text).id
    except BadRequest as exc:
        raise BadRequest(f"{what} must be an hm:// id: {exc.message}") from None


def _account(what: str, value: object) -> str:
    text = _text(what, value, MAX_SHORT_BYTES)
    assert text is not None
    if text.startswith("hm://"):
        try:
            hm = parse_hm_id(text)
        except BadRequest as exc:
            raise BadRequest(f"{what} must be an account id or hm://<account>: {exc.message}") from None
        if hm.path:
            raise BadRequest(f"{what} must be an account id or hm://<account>, not a document ({text}).")
        return hm.uid
    return text


def timezone(what: str, value: object) -> str:
    """A valid IANA timezone name (as `zoneinfo` knows it)."""
    text = _text(what, value, MAX_SHORT_BYTES)
    assert text is not None
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadRequest(f'{what} {text!r} is not an IANA timezone; use a name like "Europe/Paris" or "UTC".') from None
    return text


def _schedule(value: object) -> dict[str, Any]:
    raw = _object("source.schedule", value, SCHEDULES_ACCEPTED)
    kind = raw.get("kind")
    if kind == "interval":
        _fields("An interval schedule", raw, ("kind", "every", "unit"))
        unit = raw.get("unit")
        if unit not in MAX_INTERVAL:
            raise BadRequest('schedule.unit must be "minutes" or "hours".')
        every = _int("schedule.every", raw.get("every"), 1, MAX_INTERVAL[unit])
        return {"kind": "interval", "every": every, "unit": unit}
    if kind == "weekly":
        _fields("A weekly schedule", raw, ("kind", "daysOfWeek", "timeOfDay", "timezone"))
        days = raw.get("daysOfWeek")
        if not isinstance(days, list) or not days:
            raise BadRequest("schedule.daysOfWeek must be a non-empty list of integers 0-6 (0 is Sunday).")
        picked = sorted({_int("schedule.daysOfWeek[]", d, 0, 6) for d in days})  # pyright: ignore[reportUnknownVariableType]
        return {
            "kind": "weekly",
            "daysOfWeek": picked,
            "timeOfDay": _time_of_day(raw.get("timeOfDay")),
            "timezone": timezone("schedule.timezone", raw.get("timezone")),
        }
    if kind == "once":
        _fields("A once schedule", raw, ("kind", "runAt", "timezone"))
        once: dict[str, Any] = {"kind": "once", "runAt": _int("schedule.runAt", raw.get("runAt"), 1, MAX_SAFE_INTEGER)}
        if raw.get("timezone") is not None:
            once["timezone"] = timezone("schedule.timezone", raw["timezone"])
        return once
    raise BadRequest(f"Unknown schedule kind {kind!r}. Accepted: {SCHEDULES_ACCEPTED}.")


def _time_of_day(value: object) -> str:
    hours, _, minutes = value.partition(":") if isinstance(value, str) else ("", "", "")
    digits = hours.isascii() and minutes.isascii() and hours.isdigit() and minutes.isdigit()
    if not (digits and 1 <= len(hours) <= 2 and len(minutes) == 2):
        raise BadRequest(f'schedule.timeOfDay must be "HH:MM" (24-hour), not {value!r}.')
    if int(hours) > 23 or int(minutes) > 59:
        raise BadRequest(f'schedule.timeOfDay {value!r} is not a time: hours 0-23, minutes 0-59 ("HH:MM").')
    return f"{int(hours):02d}:{minutes}"


def _document_comment(raw: dict[str, Any]) -> dict[str, Any]:
    _fields("A document-comment source", raw, ("type", "resource", "author"))
    source: dict[str, Any] = {"type": "document-comment", "resource": _resource("source.resource", raw.get("resource"))}
    author = _text("source.author", raw.get("author"), MAX_SHORT_BYTES, required=False)
    if author is not None:
        source["author"] = author
    return source


def _user_mention(raw: dict[str, Any]) -> dict[str, Any]:
    _fields("A user-mention source", raw, ("type", "mentionedAccounts", "mentionedAccount", "resourcePrefix"))
    accounts = raw.get("mentionedAccounts")
    if accounts is None and raw.get("mentionedAccount") is not None:
        accounts = [raw["mentionedAccount"]]  # the legacy single form
    if not isinstance(accounts, list) or not accounts:
        raise BadRequest(f"source.mentionedAccounts must be a list of 1 to {MAX_MENTIONED} account ids.")
    unique = list(dict.fromkeys(_account("source.mentionedAccounts[]", a) for a in accounts))  # pyright: ignore[reportUnknownVariableType]
    if len(unique) > MAX_MENTIONED:
        raise BadRequest(f"source.mentionedAccounts lists {len(unique)} accounts: at most {MAX_MENTIONED}.")
    source: dict[str, Any] = {"type": "user-mention", "mentionedAccounts": unique}
    prefix = _resource("source.resourcePrefix", raw.get("resourcePrefix"), required=False)
    if prefix is not None:
        source["resourcePrefix"] = prefix
    return source


def _site_update(raw: dict[str, Any]) -> dict[str, Any]:
    _fields("A site-update source", raw, ("type", "resourcePrefix", "eventTypes"))
    source: dict[str, Any] = {
        "type": "site-update",
        "resourcePrefix": _resource("source.resourcePrefix", raw.get("resourcePrefix")),
    }
    types = raw.get("eventTypes")
    if types is not None:
        if not isinstance(types, list) or len(types) > MAX_EVENT_TYPES:  # pyright: ignore[reportUnknownArgumentType]
            raise BadRequest(f"source.eventTypes must be a list of at most {MAX_EVENT_TYPES} event types.")
        source["eventTypes"] = list(dict.fromkeys(_text("source.eventTypes[]", t, MAX_SHORT_BYTES) for t in types))  # pyright: ignore[reportUnknownVariableType]
    return source


def _run_completed(raw: dict[str, Any]) -> dict[str, Any]:
    _fields("A run-completed source", raw, ("type", "agentId", "status", "titleMatch"))
    source: dict[str, Any] = {"type": "run-completed"}
    agent = _text("source.agentId", raw.get("agentId"), MAX_SHORT_BYTES, required=False)
    if agent is not None:
        source["agentId"] = agent
    status = raw.get("status")
    if status is not None:
        if status not in RUN_STATUSES:
            raise BadRequest(f"source.status must be one of {', '.join(RUN_STATUSES)}, not {status!r}.")
        source["status"] = status
    title = _text("source.titleMatch", raw.get("titleMatch"), MAX_SHORT_BYTES, required=False)
    if title is not None:
        source["titleMatch"] = title
    return source


def _webhook(raw: dict[str, Any]) -> dict[str, Any]:
    _fields("A webhook source", raw, ("type",))
    return {"type": "webhook"}


def _schedule_source(raw: dict[str, Any]) -> dict[str, Any]:
    _fields("A schedule source", raw, ("type", "schedule"))
    return {"type": "schedule", "schedule": _schedule(raw.get("schedule"))}


NORMALIZERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "schedule": _schedule_source,
    "document-comment": _document_comment,
    "user-mention": _user_mention,
    "site-update": _site_update,
    "run-completed": _run_completed,
    "webhook": _webhook,
}
"""One normalizer per source type; a new source is one more entry."""


def normalize_source(value: object) -> dict[str, Any]:
    """The stored form of a trigger source.

    Raises:
        BadRequest: naming the field that is wrong and what is accepted.
    """
    raw = _object("source", value, SOURCES_ACCEPTED)
    kind = raw.get("type")
    normalizer = NORMALIZERS.get(kind) if isinstance(kind, str) else None
    if normalizer is None:
        raise BadRequest(f"Unknown trigger source type {kind!r}. Accepted: {SOURCES_ACCEPTED}.")
    return normalizer(raw)


def normalize_continuation(value: object) -> dict[str, Any] | None:
    """The stored form of a continuation: None for `newThread`.

    Raises:
        BadRequest: naming the field that is wrong and what is accepted.
    """
    if value is None:
        return None
    raw = _object("continuation", value, CONTINUATIONS_ACCEPTED)
    kind = raw.get("kind")
    if kind == "newThread":
        _fields("A newThread continuation", raw, ("kind",))
        return None
    if kind != "wake":
        raise BadRequest(f"Unknown continuation kind {kind!r}. Accepted: {CONTINUATIONS_ACCEPTED}.")
    _fields("A wake continuation", raw, ("kind", "signal", "runId", "payload"))
    signal = _text("continuation.signal", raw.get("signal"), MAX_SHORT_BYTES)
    assert signal is not None
    if len(signal) > MAX_SIGNAL_CHARS:
        raise BadRequest(f"continuation.signal is too long: at most {MAX_SIGNAL_CHARS} characters.")
    wake: dict[str, Any] = {"kind": "wake", "signal": signal}
    run_id = _text("continuation.runId", raw.get("runId"), MAX_SHORT_BYTES, required=False)
    if run_id is not None:
        wake["runId"] = run_id
    if "payload" in raw:
        wake["payload"] = _json_safe("continuation.payload", raw["payload"])
    return wake


def _json_safe(what: str, value: object) -> Any:
    if depth_exceeds(value, MAX_INPUT_DEPTH):
        raise BadRequest(f"{what} nests deeper than {MAX_INPUT_DEPTH} levels.")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        raise BadRequest(
            f"{what} must be plain JSON (objects, lists, strings, finite numbers, booleans, null)."
        ) from None
    if len(text.encode("utf-8")) > MAX_PAYLOAD_BYTES:
        raise BadRequest(f"{what} is too large: at most {MAX_PAYLOAD_BYTES} bytes of JSON.")
    return json.loads(text)


def normalize_body(name: str, value: object) -> TriggerSpec:
    """A whole trigger body as `write ~/triggers/<name>` receives it (a `name` in it is ignored: the address names
    the trigger).

    Raises:
        BadRequest: naming the field that is wrong and what is accepted.
    """
    if not isinstance(value, dict):
        raise BadRequest(f"write ~/triggers/{name} expects JSON content: {SHAPE}.")
    raw: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
    _fields(f"write ~/triggers/{name}", raw, ("name", "source", "prompt", "enabled", "continuation"))
    if "source" not in raw:
        raise BadRequest(f"write ~/triggers/{name} needs a source: {SOURCES_ACCEPTED}.")
    source = normalize_source(raw["source"])
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise BadRequest(f"write ~/triggers/{name} needs a prompt: the first message of the thread a firing starts.")
    if utf8_size("The prompt", prompt) > MAX_PROMPT_BYTES:
        raise BadRequest(f"The prompt is too long: at most {MAX_PROMPT_BYTES} bytes.")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise BadRequest("enabled must be true or false.")
    return TriggerSpec(
        source=source,
        prompt=prompt.strip(),
        enabled=enabled,
        continuation=normalize_continuation(raw.get("continuation")),
    )


# -- the human line --------------------------------------------------------------------------------------------------


def _local(ms: int, zone: str | None) -> str:
    tz = ZoneInfo(zone) if zone else UTC
    return datetime.fromtimestamp(ms / 1000, tz).strftime("%Y-%m-%d %H:%M")


def _schedule_when(schedule: dict[str, Any]) -> str:
    kind = schedule["kind"]
    if kind == "interval":
        every, unit = schedule["every"], schedule["unit"]
        return f"every {unit[:-1]}" if every == 1 else f"every {every} {unit}"
    if kind == "weekly":
        days = schedule["daysOfWeek"]
        named = "day" if len(days) == 7 else ", ".join(DAY_NAMES[d] for d in days)
        return f"every {named} at {schedule['timeOfDay']} ({schedule['timezone']})"
    zone = schedule.get("timezone")
    return f"once at {_local(schedule['runAt'], zone)} ({zone or 'UTC'})"


_ENDS = {"succeeded": "succeeds", "failed": "fails", "canceled": "is canceled"}


def when(source: dict[str, Any]) -> str:
    """One line saying when a trigger fires, for listings and save summaries."""
    kind = source["type"]
    if kind == "schedule":
        return _schedule_when(source["schedule"])
    if kind == "document-comment":
        by = f" by {source['author']}" if source.get("author") else ""
        return f"when someone{by} comments on {source['resource']}"
    if kind == "user-mention":
        accounts = source["mentionedAccounts"]
        who = accounts[0] if len(accounts) == 1 else "any of " + ", ".join(accounts)
        under = f" under {source['resourcePrefix']}" if source.get("resourcePrefix") else ""
        return f"when {who} is mentioned{under}"
    if kind == "site-update":
        types = f" ({', '.join(source['eventTypes'])})" if source.get("eventTypes") else ""
        return f"when anything under {source['resourcePrefix']} changes{types}"
    if kind == "run-completed":
        of = f" of agent {source['agentId']}" if source.get("agentId") else ""
        titled = f' titled like "{source["titleMatch"]}"' if source.get("titleMatch") else ""
        return f"when a run{of}{titled} {_ENDS.get(source.get('status', ''), 'ends')}"
    if kind == "webhook":
        return "when a signed webhook delivery arrives (POST /hooks/<trigger id>)"
    return f"on {kind}"


__all__ = [
    "CONTRACT",
    "NORMALIZERS",
    "SHAPE",
    "TriggerSpec",
    "normalize_body",
    "normalize_continuation",
    "normalize_source",
    "timezone",
    "utf8_size",
    "when",
]
