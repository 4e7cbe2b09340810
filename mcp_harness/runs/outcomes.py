"""What an executor reports when it stops working on a run (HARNESS §8, "Finalize")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Succeeded:
    """The run finished; `output` is its result."""

    output: Any = None


@dataclass(frozen=True)
class Failed:
    """The run failed. A `retryable` failure is queued again while attempts remain."""

    code: str
    message: str
    retryable: bool = False
    http_status: int | None = None
    detail: dict[str, Any] | None = None

    def to_error(self) -> dict[str, Any]:
        """The stored `error_cbor` shape: `{code, message, retryable?, httpStatus?, ...detail}`."""
        error: dict[str, Any] = {**(self.detail or {}), "code": self.code, "message": self.message}
        if self.retryable:
            error["retryable"] = True
        if self.http_status is not None:
            error["httpStatus"] = self.http_status
        return error


@dataclass(frozen=True)
class Parked:
    """The run waits (`{reason: children|timer|event|budget-pause, ...}`) and is executed again once requeued."""

    wait: dict[str, Any]


@dataclass(frozen=True)
class Canceled:
    """The run was stopped; `output` is whatever it had produced."""

    output: Any = None


Outcome = Succeeded | Failed | Parked | Canceled

INTERRUPTED = (
    "Interrupted by a service restart before this tool finished; whether its side effects happened is unknown. "
    "Verify state before retrying."
)
"""The answer to a call that a crash or shutdown cut short (HARNESS §8): what a transcript records in its place,
and what a script's replay raises for it (code `interrupted`)."""


__all__ = ["INTERRUPTED", "Canceled", "Failed", "Outcome", "Parked", "Succeeded"]
