"""What a run's terminal commit does for triggers (HARNESS §10 "run-completed", `#fireRunCompletedTriggers`).

The engine calls `on_run_terminal` inside the transaction of every terminal commit — runs of every kind, children
and canceled runs included — so what it records stands or falls with the terminal state itself:
- a run a firing started settles that firing: `succeeded`, or `failed` with the error, which also becomes the
  trigger's `last_error` (the next occurrence fires all the same, and clears it);
- the account's enabled `run-completed` triggers whose filters match fire, keyed `run:<runId>`, unless the loop
  guard finds the trigger already in the run's chain.

The loop guard (`#triggerAlreadyInChain`, `TRIGGER_CHAIN_MAX_HOPS = 8`) walks back from the finished run through the
firings that started it: a firing of this trigger means a loop; after 8 hops with a firing still present it is
treated as one too. Unlike the reference, a run a firing did not start itself answers with its root run's firing,
so the children of a trigger-started run cannot feed a trigger back forever (HARNESS Appendix A, 6).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcp_harness.triggers.fire import FireHost, fire

if TYPE_CHECKING:
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.store.triggers import TriggerRecord

logger = logging.getLogger(__name__)

MAX_HOPS = 8


def on_run_terminal(host: FireHost, runs: Sequence[RunRecord]) -> None:
    """Settle each run's own firing and fire matching run-completed triggers. Blocking, in the terminal commit; each
    write under a savepoint of its own (the engine opens none around its hooks), so a failure leaves none half done.
    Runs ending together (a fan-out's leaves) read their account's enabled triggers once, not once each."""
    enabled: dict[str, list[TriggerRecord]] = {}
    for run in runs:
        try:
            if run.trigger_firing_id is not None:
                with host.db.transaction():
                    settle_firing(host, run)
            if run.account_id not in enabled:
                enabled[run.account_id] = host.triggers.enabled_of_type(run.account_id, "run-completed")
            if _fire_for(host, enabled[run.account_id], run):
                enabled.pop(run.account_id)  # a firing may change what is enabled: the next run reads again
        except Exception:  # one run's failure leaves the others' firings (and every terminal commit) standing
            logger.exception("The run-completed triggers of run %s failed", run.id)
            enabled.pop(run.account_id, None)


def _fire_for(host: FireHost, triggers: list[TriggerRecord], run: RunRecord) -> bool:
    """Fire the triggers among `triggers` that `run` matches; whether any firing was tried."""
    tried = False
    for trigger in triggers:
        if not matches(trigger.source, run):
            continue
        if in_chain(host, trigger, run):
            logger.info("Trigger %s skipped for run %s: it is already in that run's chain", trigger.id, run.id)
            continue
        tried = True
        try:
            with host.db.transaction():
                fire(
                    host,
                    trigger=trigger,
                    dedupe_key=f"run:{run.id}",
                    activity=run_activity(run),
                    summary=f'run "{run.title}" {run.status}',
                )
        except Exception as exc:  # one trigger's failure must not undo the terminal commit or the other firings
            logger.exception("Firing trigger %s for run %s failed", trigger.id, run.id)
            host.triggers.set_error(trigger.id, f"Could not fire for run {run.id}: {exc}")
    return tried


def settle_firing(host: FireHost, run: RunRecord) -> None:
    """The firing that started `run` ends with it; a failure is the trigger's `last_error` too."""
    assert run.trigger_firing_id is not None
    store = host.triggers
    firing = store.firing(run.trigger_firing_id)
    if firing is None or firing.run_id != run.id:
        return
    if run.status == "succeeded":
        store.update_firing(firing.id, status="succeeded")
        return
    message = (run.error or {}).get("message") or ("Canceled." if run.status == "canceled" else "The run failed.")
    error = f"Run {run.id} {run.status}: {message}"
    store.update_firing(firing.id, status="failed", error=error)
    store.set_error(firing.trigger_id, error)


def matches(source: dict[str, Any], run: RunRecord) -> bool:
    """agentId equality, status equality, a case-insensitive title substring: every filter given must hold."""
    if source.get("agentId") is not None and source["agentId"] != run.agent_id:
        return False
    if source.get("status") is not None and source["status"] != run.status:
        return False
    title_match = source.get("titleMatch")
    return title_match is None or title_match.lower() in run.title.lower()


def run_activity(run: RunRecord) -> dict[str, Any]:
    activity: dict[str, Any] = {
        "type": "run-completed",
        "runId": run.id,
        "runTitle": run.title,
        "runStatus": run.status,
        "agentId": run.agent_id,
    }
    if run.session_id is not None:
        activity["sessionId"] = run.session_id
    return activity


def _firing_of(host: FireHost, run: RunRecord) -> str | None:
    if run.trigger_firing_id is not None or run.root_run_id == run.id:
        return run.trigger_firing_id
    root = host.runs.find(run.root_run_id)
    return root.trigger_firing_id if root is not None else None


def in_chain(host: FireHost, trigger: TriggerRecord, run: RunRecord) -> bool:
    """Whether `trigger` already started a run in the chain that led to `run` (within 8 hops; beyond, assumed)."""
    current: RunRecord | None = run
    for _ in range(MAX_HOPS):
        firing_id = _firing_of(host, current) if current is not None else None
        if firing_id is None:
            return False
        firing = host.triggers.firing(firing_id)
        if firing is None:
            return False
        if firing.trigger_id == trigger.id:
            return True
        previous = (firing.activity or {}).get("runId")
        if not isinstance(previous, str):
            return False  # only run-completed firings continue a chain
        current = host.runs.find(previous)
    return current is not None and _firing_of(host, current) is not None


__all__ = ["MAX_HOPS", "in_chain", "matches", "on_run_terminal", "run_activity", "settle_firing"]
