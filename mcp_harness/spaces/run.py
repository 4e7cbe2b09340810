"""The `run:<id>` space: a run's public record (the reading is in threads.py, next to the transcripts), and the
signal a waiting script receives (`write run:<id>` {signal, payload?}, delivered by runs/signals.py)."""

from __future__ import annotations

import json
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.errors import BadRequest
from mcp_harness.spaces import threads
from mcp_harness.spaces.space import Space
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options


def read_run(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    return threads.read_run(ctx, address.rest, fmt)


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
A run's public record — id, kind, status, title, what it waits on (`wait`), usage, plan, children ({id, status, title, sessionId}), error, output, unmetObligations — and a script's source as `sourceText`. A run you may not see reads as not found.""",  # noqa: E501
    write=write_run,
    write_options=WRITE_OPTIONS,
    writes=_names_a_run,
    write_form="run:<id> (JSON content {signal, payload?})",
    write_line="""- `run:<id>`: send a signal to a script waiting in `ctx.wait_for_event`: JSON `content` {signal, payload?}; answers {delivered} (false when no wait of the run accepts it).""",  # noqa: E501
    write_details="""## `run:<id>` (write)
A signal for a script child parked in `ctx.wait_for_event`: JSON content (or options) {"signal": "<name>", "payload"?: <JSON, at most 256 KiB>}. The oldest wait of the run that accepts the signal — one naming it, or one naming none — receives {source: "signal", signal, payload?} and the script resumes. Answers {delivered, runId, signal}; `delivered: false` (with why) when the run is not waiting or none of its waits accepts that signal. A run you may not see reads as not found.""",  # noqa: E501
)
