"""Trigger bodies as `write ~/triggers/<name>` checks them (HARNESS §10): what each source and continuation stores,
and every refusal, each naming the field and what is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.triggers.sources import normalize_body, normalize_continuation, normalize_source, when

ACCOUNT = "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
DOC = f"hm://{ACCOUNT}/notes/plan"
PROMPT = "Look at it."


def refusal(body: object) -> str:
    with pytest.raises(BadRequest) as info:
        normalize_body("t", body)
    return info.value.message


def test_sources_are_stored_normalized() -> None:
    # A trailing slash or a block fragment never narrows the match: the resource is stored by its base id.
    comment = normalize_source({"type": "document-comment", "resource": f"{DOC}/#blk", "author": " a "})
    assert comment == {"type": "document-comment", "resource": DOC, "author": "a"}
    mention = normalize_source({"type": "user-mention", "mentionedAccount": f"hm://{ACCOUNT}"})
    assert mention == {"type": "user-mention", "mentionedAccounts": [ACCOUNT]}
    many = normalize_source({"type": "user-mention", "mentionedAccounts": ["a", "b", "a"], "resourcePrefix": DOC})
    assert many == {"type": "user-mention", "mentionedAccounts": ["a", "b"], "resourcePrefix": DOC}
    site = normalize_source({"type": "site-update", "resourcePrefix": f"https://gw.example/hm/{ACCOUNT}/notes"})
    assert site == {"type": "site-update", "resourcePrefix": f"hm://{ACCOUNT}/notes"}
    weekly = normalize_source(
        {
            "type": "schedule",
            "schedule": {"kind": "weekly", "daysOfWeek": [5, 1, 1], "timeOfDay": "7:05", "timezone": "Europe/Paris"},
        }
    )
    assert weekly["schedule"] == {
        "kind": "weekly",
        "daysOfWeek": [1, 5],
        "timeOfDay": "07:05",
        "timezone": "Europe/Paris",
    }
    run = normalize_source({"type": "run-completed", "status": "failed", "titleMatch": "nightly"})
    assert run == {"type": "run-completed", "status": "failed", "titleMatch": "nightly"}


def test_continuations_default_to_a_new_thread_and_wake_keeps_its_signal() -> None:
    assert normalize_continuation(None) is None and normalize_continuation({"kind": "newThread"}) is None
    wake = normalize_continuation({"kind": "wake", "signal": "go", "runId": "r1", "payload": {"n": [1, 2]}})
    assert wake == {"kind": "wake", "signal": "go", "runId": "r1", "payload": {"n": [1, 2]}}
    spec = normalize_body(
        "t", {"name": "ignored", "source": {"type": "run-completed"}, "prompt": " x ", "enabled": False}
    )
    assert (spec.prompt, spec.enabled, spec.continuation) == ("x", False, None)


def test_the_when_line_says_when_each_source_fires() -> None:
    def line(source: dict[str, Any]) -> str:
        return when(normalize_source(source))

    every = {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}}
    assert line(every) == "every hour"
    every["schedule"] = {"kind": "interval", "every": 15, "unit": "minutes"}
    assert line(every) == "every 15 minutes"
    weekly = {"kind": "weekly", "daysOfWeek": [1, 3], "timeOfDay": "09:00", "timezone": "Europe/Paris"}
    assert line({"type": "schedule", "schedule": weekly}) == "every Mon, Wed at 09:00 (Europe/Paris)"
    daily = {**weekly, "daysOfWeek": [0, 1, 2, 3, 4, 5, 6]}
    assert line({"type": "schedule", "schedule": daily}) == "every day at 09:00 (Europe/Paris)"
    once = {"kind": "once", "runAt": 1704096000000, "timezone": "Asia/Tokyo"}
    assert line({"type": "schedule", "schedule": once}) == "once at 2024-01-01 17:00 (Asia/Tokyo)"
    assert line({"type": "document-comment", "resource": DOC}) == f"when someone comments on {DOC}"
    assert line({"type": "user-mention", "mentionedAccounts": ["a", "b"]}) == "when any of a, b is mentioned"
    assert line({"type": "site-update", "resourcePrefix": DOC, "eventTypes": ["comment"]}) == (
        f"when anything under {DOC} changes (comment)"
    )
    assert line({"type": "run-completed", "titleMatch": "x", "status": "failed"}) == 'when a run titled like "x" fails'
    assert line({"type": "run-completed"}) == "when a run ends"


def _schedule(**fields: Any) -> dict[str, Any]:
    return {"source": {"type": "schedule", "schedule": fields}, "prompt": PROMPT}


def _source(**fields: Any) -> dict[str, Any]:
    return {"source": fields, "prompt": PROMPT}


REFUSALS: list[tuple[object, str]] = [
    ("not an object", "expects JSON content: {source, prompt, enabled?, continuation?}"),
    ({"prompt": PROMPT}, 'needs a source: {type: "schedule", schedule}'),
    ({"source": {"type": "run-completed"}}, "needs a prompt"),
    ({"source": {"type": "run-completed"}, "prompt": "  "}, "needs a prompt"),
    ({"source": {"type": "run-completed"}, "prompt": "x" * 70_000}, "at most 65536 bytes"),
    ({"source": {"type": "run-completed"}, "prompt": PROMPT, "enabled": "yes"}, "enabled must be true or false"),
    ({"source": {"type": "run-completed"}, "prompt": PROMPT, "when": 1}, 'does not take "when". Accepted fields'),
    ({"source": "daily", "prompt": PROMPT}, "source must be an object"),
    (_source(type="cron"), "Unknown trigger source type 'cron'. Accepted: {type: \"schedule\""),
    (_source(type="schedule"), "source.schedule must be an object"),
    (_schedule(kind="daily"), "Unknown schedule kind 'daily'. Accepted: {kind: \"interval\""),
    (_schedule(kind="interval", every=0, unit="minutes"), "schedule.every must be an integer from 1 to"),
    (_schedule(kind="interval", every=1.5, unit="hours"), "schedule.every must be an integer"),
    (_schedule(kind="interval", every=True, unit="hours"), "schedule.every must be an integer"),
    (_schedule(kind="interval", every=float("inf"), unit="hours"), "schedule.every must be an integer"),
    (_schedule(kind="weekly", daysOfWeek=[1], timeOfDay="٠٩:٣٠", timezone="UTC"), 'must be "HH:MM"'),
    ({"source": {"type": "run-completed"}, "prompt": "a\ud800"}, "is not valid Unicode text"),
    (_source(type="run-completed", titleMatch="\udfff"), "source.titleMatch is not valid Unicode text"),
    (_schedule(kind="interval", every=10**9, unit="hours"), "from 1 to 87600, not 1000000000"),
    (_schedule(kind="interval", every=1, unit="days"), 'schedule.unit must be "minutes" or "hours"'),
    (_schedule(kind="interval", every=1, unit="hours", at="9"), 'An interval schedule does not take "at"'),
    (_schedule(kind="weekly", daysOfWeek=[], timeOfDay="09:00", timezone="UTC"), "non-empty list of integers 0-6"),
    (_schedule(kind="weekly", daysOfWeek=[7], timeOfDay="09:00", timezone="UTC"), "from 0 to 6, not 7"),
    (_schedule(kind="weekly", daysOfWeek=[1], timeOfDay="24:00", timezone="UTC"), "hours 0-23, minutes 0-59"),
    (_schedule(kind="weekly", daysOfWeek=[1], timeOfDay="09:60", timezone="UTC"), "hours 0-23, minutes 0-59"),
    (_schedule(kind="weekly", daysOfWeek=[1], timeOfDay="9am", timezone="UTC"), 'must be "HH:MM" (24-hour)'),
    (_schedule(kind="weekly", daysOfWeek=[1], timeOfDay="09:00", timezone="Mars/Olympus"), "is not an IANA timezone"),
    (_schedule(kind="weekly", daysOfWeek=[1], timeOfDay="09:00"), "schedule.timezone must be a non-empty string"),
    (_schedule(kind="once", runAt=0), "schedule.runAt must be an integer from 1 to 9007199254740991"),
    (_schedule(kind="once", runAt=2**53), "schedule.runAt must be an integer from 1 to 9007199254740991"),
    (_schedule(kind="once", runAt=5, timezone="Nowhere"), "is not an IANA timezone"),
    (_source(type="document-comment"), "source.resource must be a non-empty string"),
    (_source(type="document-comment", resource="notes/plan"), "source.resource must be an hm:// id"),
    (_source(type="document-comment", resource=f"hm://{'a' * 2100}"), "source.resource is too long: at most 2048"),
    (_source(type="document-comment", resource=DOC, author="x" * 300), "source.author is too long: at most 256"),
    (_source(type="document-comment", resource=DOC, path="/"), 'A document-comment source does not take "path"'),
    (_source(type="user-mention"), "source.mentionedAccounts must be a list of 1 to 32 account ids"),
    (_source(type="user-mention", mentionedAccounts=[]), "must be a list of 1 to 32"),
    (_source(type="user-mention", mentionedAccounts=[f"a{i}" for i in range(33)]), "lists 33 accounts: at most 32"),
    (_source(type="user-mention", mentionedAccounts=["x" * 300]), "mentionedAccounts[] is too long"),
    (_source(type="user-mention", mentionedAccounts=[DOC]), "an account id or hm://<account>, not a document"),
    (_source(type="user-mention", mentionedAccounts=["a"], resourcePrefix="x"), "source.resourcePrefix must be an hm"),
    (_source(type="site-update"), "source.resourcePrefix must be a non-empty string"),
    (_source(type="site-update", resourcePrefix=DOC, eventTypes="comment"), "a list of at most 32 event types"),
    (_source(type="site-update", resourcePrefix=DOC, eventTypes=["c"] * 33), "a list of at most 32 event types"),
    (_source(type="site-update", resourcePrefix=DOC, eventTypes=["x" * 300]), "eventTypes[] is too long"),
    (_source(type="run-completed", status="done"), "source.status must be one of succeeded, failed, canceled"),
    (_source(type="run-completed", titleMatch="x" * 300), "source.titleMatch is too long: at most 256"),
    (_source(type="run-completed", agentId=""), "source.agentId must be a non-empty string"),
    ({**_source(type="run-completed"), "continuation": "wake"}, "continuation must be an object"),
    ({**_source(type="run-completed"), "continuation": {"kind": "append"}}, "Unknown continuation kind 'append'"),
    ({**_source(type="run-completed"), "continuation": {"kind": "wake"}}, "continuation.signal must be a non-empty"),
    ({**_source(type="run-completed"), "continuation": {"kind": "wake", "signal": "s" * 300}}, "at most 256 bytes"),
    ({**_source(type="run-completed"), "continuation": {"kind": "wake", "signal": "s" * 201}}, "at most 200 char"),
    (
        {**_source(type="run-completed"), "continuation": {"kind": "wake", "signal": "go", "to": 1}},
        'does not take "to"',
    ),
    (
        {**_source(type="run-completed"), "continuation": {"kind": "wake", "signal": "go", "payload": float("nan")}},
        "continuation.payload must be plain JSON",
    ),
    (
        {**_source(type="run-completed"), "continuation": {"kind": "wake", "signal": "go", "payload": "x" * 70_000}},
        "continuation.payload is too large: at most 65536 bytes",
    ),
    ({**_source(type="run-completed"), "continuation": {"kind": "newThread", "x": 1}}, 'does not take "x"'),
]


@pytest.mark.parametrize(("body", "fragment"), REFUSALS)
def test_every_malformed_body_is_refused_naming_what_is_accepted(body: object, fragment: str) -> None:
    assert fragment in refusal(body)
