"""Runs: durable units of work (an agent turn, a child, a workflow) and the engine that executes them (HARNESS §8).

The store (`mcp_harness.store.runs.RunStore`) records where each run stands; `RunEngine` claims due runs and hands
them to an `Executor`, which reports an `Outcome`.
"""

from mcp_harness.runs.engine import Executor, FinalizedHook, RunEngine
from mcp_harness.runs.outcomes import Canceled, Failed, Outcome, Parked, Succeeded
from mcp_harness.runs.records import LIVE, TERMINAL, RunKind, RunOrigin, RunQueue, RunRecord, RunStatus

__all__ = [
    "LIVE",
    "TERMINAL",
    "Canceled",
    "Executor",
    "Failed",
    "FinalizedHook",
    "Outcome",
    "Parked",
    "RunEngine",
    "RunKind",
    "RunOrigin",
    "RunQueue",
    "RunRecord",
    "RunStatus",
    "Succeeded",
]
