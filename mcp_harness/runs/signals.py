"""Delivering to scripts parked on `ctx.wait_for_event` (HARNESS §9.5): `SignalRun` and activity.

A delivery is one transaction: find the oldest registered wait of a waiting run that accepts what arrived, append
the journal `event {callSeq, key, waitId, delivery}` to that wait's group, requeue the run and delete all its
registered waits. Two deliveries racing for one wait are serialized by SQLite's write lock; the second finds the
run no longer waiting and writes nothing. The script's replay then finds the `event` and resolves its wait with the
delivery envelope `{source, signal?, payload?}`. Callers wake their engine afterwards (`engine.wake()`); a run
requeued from another process is claimed by the serving engine's next poll.

Matching (`accepts_signal`, `accepts_activity`): a wait naming a `signal` accepts only that signal and never
activity; a wait naming nothing accepts any signal; a wait naming `eventType`/`resource`/`author` accepts activity
whose every named field matches, by the one matcher triggers use too (hypermedia/activity_match.py: type aliases,
`hm://` authors, canonical resources), and never a signal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.activity_match import fields_match, same_resource
from mcp_harness.runs.script_journal import json_safe
from mcp_harness.store import run_waits

if TYPE_CHECKING:
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.store.db import Database
    from mcp_harness.store.run_waits import WaitRow
    from mcp_harness.store.runs import RunStore

SignalSource = Literal["signal", "trigger"]
MAX_SIGNAL_CHARS = 200
MAX_PAYLOAD_BYTES = 256 * 1024
"""A delivery is journaled whole; a bigger payload belongs in memory, with its path in the signal."""
ACTIVITY_FIELDS = ("eventType", "resource", "author")
MATCH_FIELDS = ("signal", *ACTIVITY_FIELDS)


class Activity(Protocol):
    """What an activity wait matches on: the feed's `ActivityEvent` (hypermedia/activity.py) has these, and more."""

    @property
    def type(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def author(self) -> str: ...


def check_match(match: Mapping[str, Any]) -> dict[str, str]:
    """A wait's match, checked: `{signal}`, `{}` (any signal), or activity fields (at least one).

    Raises:
        BadRequest: an unknown field, a non-string or empty value, or a signal beside activity fields.
    """
    unknown = sorted(set(match) - set(MATCH_FIELDS))
    if unknown:
        raise BadRequest(f"Unknown match field(s) {', '.join(unknown)}; a wait matches on: {', '.join(MATCH_FIELDS)}.")
    clean: dict[str, str] = {}
    for name, value in match.items():
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise BadRequest(f"The match field {name} must be a non-empty string.")
        clean[name] = value.strip()
    if "signal" in clean and len(clean) > 1:
        raise BadRequest("A wait matches a signal or activity (eventType, resource, author), not both.")
    if "signal" in clean:
        check_signal(clean["signal"])
    return clean


def check_signal(signal: str) -> str:
    if not isinstance(signal, str) or not signal.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise BadRequest("A signal needs a non-empty name.")
    if len(signal) > MAX_SIGNAL_CHARS:
        raise BadRequest(f"A signal name is at most {MAX_SIGNAL_CHARS} characters.")
    return signal.strip()


def accepts_signal(match: Mapping[str, Any], signal: str) -> bool:
    if "signal" in match:
        return match["signal"] == signal
    return not any(k in match for k in ACTIVITY_FIELDS)


def accepts_activity(match: Mapping[str, Any], event: Activity) -> bool:
    if "signal" in match or not any(k in match for k in ACTIVITY_FIELDS):
        return False  # a signal wait never takes activity, and `{}` matches no activity
    return fields_match(match, event.type, event.resource, event.author, getattr(event, "data", None))


def payload_of(payload: Any) -> Any:
    """The payload as JSON data, bounded.

    Raises:
        BadRequest: it encodes to more than MAX_PAYLOAD_BYTES.
    """
    safe = json_safe(payload)
    size = len(json.dumps(safe, ensure_ascii=False).encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise BadRequest(f"A signal payload is at most {MAX_PAYLOAD_BYTES // 1024} KiB of JSON; this one is {size} B.")
    return safe


def deliver_signal(
    runs: RunStore | Database,
    *,
    account_id: str,
    run_id: str | None,
    signal: str,
    payload: Any = None,
    source: SignalSource = "signal",
    agent_id: str | None = None,
) -> str | None:
    """Deliver `signal` to the oldest accepting wait of `run_id` (or, when None, of any run of the account — only of
    `agent_id`'s runs when given: a `wake` trigger wakes its own agent's scripts). Returns the run id delivered to,
    None when nobody was listening. Blocking; one transaction.

    Raises:
        BadRequest: a blank or over-long signal name, or an over-large payload.
    """
    store = _store(runs)
    name = check_signal(signal)
    delivery: dict[str, Any] = {"source": source, "signal": name}
    if payload is not None:
        delivery["payload"] = payload_of(payload)
    with store.db.transaction() as conn:
        for wait in run_waits.for_signal(conn, account_id, run_id, name, agent_id):
            if accepts_signal(wait.match, name) and _deliver(store, wait, delivery):
                return wait.run_id
    return None


def deliver_activity(runs: RunStore | Database, event: Activity) -> list[str]:
    """Deliver an activity event to every waiting run with an accepting activity wait (its oldest one). Returns the
    runs delivered to. Blocking; one transaction."""
    store = _store(runs)
    delivery: dict[str, Any] = {"source": "activity", "payload": _activity_payload(event)}
    delivered: list[str] = []
    with store.db.transaction() as conn:
        for wait in run_waits.for_activity(conn):
            if wait.run_id in delivered or not accepts_activity(wait.match, event):
                continue
            if _deliver(store, wait, delivery):
                delivered.append(wait.run_id)
    return delivered


def not_delivered(runs: RunStore | Database, run: RunRecord | None, run_id: str, signal: str) -> str:
    """Why a signal to `run` reached nobody, for the sender: no such run, not waiting, or what its waits accept."""
    if run is None:
        return f"No run {run_id}."
    if run.status != "waiting":
        return f"Run {run_id} is {run.status}, not waiting: nobody received signal {signal!r}."
    store = _store(runs)
    with store.db.reading() as conn:
        waits = run_waits.of_run(conn, run.id)
    accepted = sorted({_accepts(w) for w in waits})
    if not waits:
        return f"Run {run_id} waits on {(run.wait or {}).get('reason')}, not on an event: nobody received {signal!r}."
    return f"No wait of run {run_id} accepts signal {signal!r}; it waits for: {', '.join(accepted)}."


def _accepts(wait: WaitRow) -> str:
    if wait.kind == "signal":
        return repr(wait.match["signal"])
    return "any signal" if wait.kind == "any" else f"activity {json.dumps(wait.match, sort_keys=True)}"


def _deliver(store: RunStore, wait: WaitRow, delivery: dict[str, Any]) -> bool:
    """Inside the delivery's transaction: journal the event on the wait's group, requeue, drop the run's waits."""
    run = store.find(wait.run_id)
    if run is None or run.status != "waiting" or (run.wait or {}).get("reason") != "event":
        return False
    entry = {"callSeq": wait.call_seq, "kind": "event", "key": wait.key, "waitId": wait.wait_id, "delivery": delivery}
    store.append_journal(run.id, [entry])
    with store.db.transaction() as conn:
        run_waits.clear(conn, run.id)
    return store.requeue(run.id)


def _activity_payload(event: Activity) -> dict[str, Any]:
    """The event as the script sees it: the feed's fields when it is an `ActivityEvent`, else the three matched."""
    fields = ("key", "type", "cid", "author", "resource", "target", "mentions", "summary", "observed_at", "event_at")
    data: dict[str, Any] = {"type": event.type, "resource": event.resource, "author": event.author}
    for name in fields:
        value = getattr(event, name, None)
        if value is not None:
            data[_camel(name)] = json_safe(value)
    return data


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _store(runs: RunStore | Database) -> RunStore:
    from mcp_harness.store.runs import RunStore

    return runs if isinstance(runs, RunStore) else RunStore(runs)


__all__ = [
    "Activity",
    "accepts_activity",
    "accepts_signal",
    "check_match",
    "check_signal",
    "deliver_activity",
    "deliver_signal",
    "not_delivered",
    "same_resource",
]
