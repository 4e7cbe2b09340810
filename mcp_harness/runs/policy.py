"""The numbers finalization applies: retry backoff, when a parked run wakes by itself, usage sums.

Usage blocks are `{input, output, cacheRead, cacheWrite, total, children?: {same five, runs}}`. Own counters
accumulate every report (never overwritten, so a resumed run keeps its earlier turns); `children` sums the whole
subtree below the run and `runs` counts the direct children that reached a terminal state.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "total")
RETRY_BASE_MS = 5_000
RETRY_CAP_MS = 300_000


def retry_delay_ms(attempt: int, *, base_ms: int = RETRY_BASE_MS, cap_ms: int = RETRY_CAP_MS) -> int:
    """Backoff after failed attempt `attempt` (1-based): `min(base·2^(attempt−1), cap)` plus jitter."""
    exp = min(base_ms * 2 ** max(attempt - 1, 0), cap_ms)
    # Jitter spreads runs that failed together (one provider outage) so their retries do not return in lockstep.
    return exp + int(random.random() * min(1000, base_ms))


def park_wake_at(wait: Mapping[str, Any]) -> int | None:
    """When the pump requeues a parked run by itself: a timer's `wakeAt`, an event's `timeoutAt`, else never."""
    reason = wait.get("reason")
    value = wait.get("wakeAt") if reason == "timer" else wait.get("timeoutAt") if reason == "event" else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def tokens(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """The five counters of a usage block; missing or malformed ones count as 0."""
    found = usage or {}
    counts: dict[str, int] = {}
    for key in USAGE_KEYS:
        value = found.get(key)
        counts[key] = value if isinstance(value, int) and not isinstance(value, bool) else 0
    return counts


def usage_delta(usage: Mapping[str, Any]) -> dict[str, int]:
    """One report of spent tokens; `total` defaults to input + output when the provider gave none."""
    delta = tokens(usage)
    if "total" not in usage:
        delta["total"] = delta["input"] + delta["output"]
    return delta


def plus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Counter-wise sum."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in USAGE_KEYS}


def is_zero(counts: Mapping[str, int]) -> bool:
    return not any(counts.get(k, 0) for k in USAGE_KEYS)
