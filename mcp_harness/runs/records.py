"""Run statuses and the decoded `runs` row with its public RunInfo.

Nothing here touches SQLite, so the store and the engine both build on it without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

RunStatus = Literal["queued", "claimed", "running", "waiting", "succeeded", "failed", "canceled"]
RunKind = Literal["agent", "workflow"]
RunOrigin = Literal["user", "trigger", "agent", "workflow", "system"]
RunQueue = Literal["interactive", "background"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "canceled"})
LIVE: frozenset[str] = frozenset({"queued", "claimed", "running", "waiting"})


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """One `runs` row with its CBOR columns decoded (None where the column is NULL)."""

    id: str
    account_id: str
    root_run_id: str
    parent_run_id: str | None
    parent_tool_call_id: str | None
    """The parent's `delegate` tool call this run answers."""
    continued_from_run_id: str | None
    depth: int
    """0 for a root run, parent's depth + 1 for a child."""
    kind: str
    agent_id: str | None
    session_id: str | None
    origin: str
    """Who asked for it: user, trigger, agent, workflow or system."""
    title: str
    model: str | None
    status: str
    input: dict[str, Any]
    output: Any
    error: dict[str, Any] | None
    """`{code, message, retryable?, httpStatus?, ...}`; kept while a retryable failure waits for its next attempt."""
    wait: dict[str, Any] | None
    """While waiting: `{reason: children|timer|event|budget-pause, ...}`."""
    attempt: int
    """Claims so far (each claim counts one, including re-executions after a park or a restart)."""
    max_attempts: int
    not_before: int | None
    """Queued: not claimable before this (retry backoff). Waiting: requeued by the pump at this time."""
    queue: str
    lease_owner: str | None
    """The engine instance that claimed it (informational: crash recovery is the boot sweep)."""
    lease_expires_at: int | None
    usage: dict[str, Any] | None
    """Accumulated tokens `{input, output, cacheRead, cacheWrite, total, children?: {..., runs}}`."""
    plan: dict[str, Any] | None
    created_at: int
    started_at: int | None
    finished_at: int | None
    updated_at: int
    trigger_firing_id: str | None = None
    source_cid: str | None = None
    source_text: str | None = None
    budget: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        """Succeeded, failed or canceled: nothing will change its status again."""
        return self.status in TERMINAL

    def to_info(self) -> dict[str, Any]:
        """The public RunInfo (camelCase). Optional fields are left out rather than sent as null."""
        info: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "title": self.title,
            "origin": self.origin,
            "rootRunId": self.root_run_id,
            "depth": self.depth,
            "attempt": self.attempt,
            "maxAttempts": self.max_attempts,
            "queue": self.queue,
            "createdAt": self.created_at,
        }
        optional = {
            "agentId": self.agent_id,
            "sessionId": self.session_id,
            "parentRunId": self.parent_run_id,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "wait": _wait_info(self.wait),
            "usage": self.usage,
            "error": self.error,
            "output": self.output,
            "plan": self.plan,
            "unmetObligations": _unmet(self.output) or _unmet(self.error),
        }
        info.update({k: v for k, v in optional.items() if v is not None})
        return info


def _wait_info(wait: dict[str, Any] | None) -> dict[str, Any] | None:
    if not wait:
        return None
    reason = wait.get("reason")
    info: dict[str, Any] = {"reason": reason}
    if reason == "children":
        info["pendingChildren"] = len(wait.get("toolCallIds") or [])
    wake_at = wait.get("wakeAt") if reason == "timer" else wait.get("timeoutAt")
    if wake_at is not None:
        info["wakeAt"] = wake_at
    label = wait.get("label") if reason == "event" else wait.get("note")
    if label is not None:
        info["label"] = label
    if wait.get("answerWith") is not None:
        info["answerWith"] = wait["answerWith"]
    return info


def _unmet(value: Any) -> Any:
    return value.get("unmetObligations") if isinstance(value, dict) else None


__all__ = ["LIVE", "TERMINAL", "RunKind", "RunOrigin", "RunQueue", "RunRecord", "RunStatus", "continued_as"]


def continued_as(record: RunRecord) -> str | None:
    """The successor a run handed over to with `ctx.continue_as_new` (its output says so), else None."""
    output = record.output
    if record.status != "succeeded" or not isinstance(output, dict) or output.get("continued") is not True:  # pyright: ignore[reportUnknownMemberType]
        return None
    successor = output.get("continuedAsRunId")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return successor if isinstance(successor, str) else None
