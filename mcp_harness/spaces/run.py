"""The `run:<id>` space: a run's public record (the reading is in threads.py, next to the transcripts), and the
signal a waiting script receives (`write run:<id>` {signal, payload?}, delivered by runs/signals.py)."""

from __future__ import annotations

import json
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.errors import BadRequest
from mcp_harness.spaces import threads
from mcp_harness.spaces.space import ResourceForm, Space, markdown_resource
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options


def read_run(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    result = threads.read_run(ctx, address.rest, fmt)
    place = result.data.get("queuePlace")
    if not isinstance(place, dict):
        return result
    # A queued run's summary says why it waits, so the first line answers "why has it not started?".
    data = result.data
    old = str(data.get("summary", ""))
    data["summary"] = f"Run {data.get('id')} ({data.get('kind')}) is {queued_why(place, str(data.get('kind')))}."
    if fmt == "json":
        return VerbResult.of(data, fmt=fmt)
    body = result.text[len(old) :].lstrip("\n")
    return VerbResult.of(data, body or None)


def queued_why(place: dict[str, Any], kind: str) -> str:
    """A queued run's place as a phrase: "queued behind 12 runs; max_agent_runs = 16", and the like."""
    reason, ahead, live, limit = place.get("reason"), place.get("ahead", 0), place.get("live", 0), place.get("limit")
    if reason == "not-before":
        return "queued until its retry's backoff ends"
    if reason == "session":
        return "queued behind its session's current turn (one turn at a time)"
    if reason == "limit":
        behind = live + ahead
        return f"queued behind {behind} run{'s' if behind != 1 else ''}; max_{kind}_runs = {limit}"
    return f"queued ({ahead} before it); it starts on the engine's next pass"


WRITE_OPTIONS = ("signal", "payload")
SIGNAL_SHAPE = '{"signal": "<name>", "payload"?: <any JSON>}'


def write_run(
    ctx: VerbContext, address: Address, content: object, options: dict[str, Any], dry_run: bool
) -> VerbResult:
    """`write run:<id>` with `{signal, payload?}`: a SignalRun to a script waiting in `ctx.wait_for_event`."""
    from mcp_harness.runs import signals

    form = f"write run:{address.rest}"
    refuse_unknown_options(form, options, WRITE_OPTIONS)
    body: object = options if "signal" in options else content
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError as exc:
            raise BadRequest(f"{form} expects JSON content {SIGNAL_SHAPE} ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(body, dict) or not isinstance(body.get("signal"), str) or set(body) - {"signal", "payload"}:  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        raise BadRequest(f"{form} expects {SIGNAL_SHAPE} as JSON content (or as options).")
    run = ctx.scope.run(ctx.services.runs.find(address.rest), address.rest)
    signal: str = body["signal"]  # pyright: ignore[reportUnknownVariableType]
    delivered = signals.deliver_signal(
        ctx.services.runs,
        account_id=run.account_id,
        run_id=run.id,
        signal=signal,
        payload=body.get("payload"),  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    )
    if delivered is None:
        why = signals.not_delivered(ctx.services.runs, ctx.services.runs.find(run.id), run.id, signal)
        return VerbResult.of({"summary": why, "delivered": False, "runId": run.id, "signal": signal})
    ctx.services.engine.wake()
    summary = f"Delivered signal {signal!r} to run {run.id}; the script resumes with it."
    return VerbResult.of({"summary": summary, "delivered": True, "runId": run.id, "signal": signal})


def _names_a_run(address: Address) -> bool:
    """`run:` without an id names no run: it gets the refusal naming what this build reads, as it always has."""
    return bool(address.rest)


SPACE = Space(
    name="run",
    kinds=("run",),
    read=read_run,
    reads=_names_a_run,
    read_form="run:<id>",
    read_line="""- `run:<id>`: a run's status, wait, usage, plan, children, error and output.""",
    read_details="""## `run:<id>`
A run's public record — id, kind, status, title, what it waits on (`wait`), usage, plan, children ({id, status, title, sessionId}), error, output, unmetObligations — and a script's source as `sourceText`. A queued run says why it has not started, in its summary ("queued behind 12 runs; max_agent_runs = 16": at most that many run at once, `[runs]` in config.toml) and as `queuePlace` {reason: limit | session | not-before | next-pass, live, ahead, limit}. A run you may not see reads as not found.""",  # noqa: E501
    write=write_run,
    write_options=WRITE_OPTIONS,
    writes=_names_a_run,
    resources=(
        ResourceForm(
            "run",
            "Run",
            "run:{id}",
            "A run's status, wait, usage, plan, children, error and output; subscribe to follow it live.",
            "text/markdown",
        ),
    ),
    resource_read=markdown_resource(read_run),
    write_form="run:<id> (JSON content {signal, payload?})",
    write_line="""- `run:<id>`: send a signal to a script waiting in `ctx.wait_for_event`: JSON `content` {signal, payload?}; answers {delivered} (false when no wait of the run accepts it).""",  # noqa: E501
    write_details="""## `run:<id>` (write)
A signal for a script child parked in `ctx.wait_for_event`: JSON content (or options) {"signal": "<name>", "payload"?: <JSON, at most 256 KiB>}. The oldest wait of the run that accepts the signal — one naming it, or one naming none — receives {source: "signal", signal, payload?} and the script resumes. Answers {delivered, runId, signal}; `delivered: false` (with why) when the run is not waiting or none of its waits accepts that signal. A run you may not see reads as not found.""",  # noqa: E501
)
