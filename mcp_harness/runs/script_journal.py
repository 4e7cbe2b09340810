"""A script run's content-keyed journal as one execution sees it (HARNESS §9.3–§9.4), and the per-execution state.

Entries are grouped by `callSeq`; groups queue FIFO per key, so each effect takes the next group for its key
whatever order parallel work completed in, and `callSeq` continues from the largest journaled.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import cbor2

from mcp_harness.runs.outcomes import Failed, Outcome

if TYPE_CHECKING:
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.run_waits import WaitRow
    from mcp_harness.store.runs import RunRecord

MAX_JOURNAL_ENTRIES = 5_000
MAX_JOURNAL_BYTES = 8 * 1024 * 1024
TERMINAL = ("succeeded", "failed", "canceled")

Answer = dict[str, Any]
"""What the prelude receives for one ctx operation: `{ok: True, value}` or `{ok: False, error: "<code>: <msg>"}`."""


def key_json(value: Any) -> str:
    """The canonical JSON of a value inside a journal key."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def json_safe(value: Any) -> Any:
    """A script's value as JSON data: tuples become lists, other unknown objects their repr."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return repr(value)


class Stop(Exception):
    """Ends the execution with an outcome: a park on children, or a failure that is not the script's to catch."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(repr(outcome))
        self.outcome = outcome


class Replay(Exception):
    """Execute the script again from the start at once: every child a parallel block was waiting for has ended
    between the check and the park, so a fresh replay finds all their results."""


@dataclass
class Group:
    """The journal entries of one effect (one `callSeq`)."""

    call_seq: int
    key: str
    entries: list[dict[str, Any]] = field(default_factory=list)

    def first(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["kind"] == kind), None)


@dataclass
class Journal:
    """The run's journal as loaded at the start of an execution: groups queued FIFO per key (HARNESS §9.4)."""

    run_id: str
    queues: dict[str, deque[Group]]
    next_seq: int
    count: int
    size: int

    @classmethod
    def load(cls, run_id: str, entries: list[dict[str, Any]]) -> Journal:
        groups: dict[int, Group] = {}
        size = 0
        for entry in entries:
            size += len(cbor2.dumps(entry, canonical=True))
            seq = int(entry["callSeq"])
            group = groups.setdefault(seq, Group(call_seq=seq, key=str(entry.get("key") or "")))
            group.entries.append(entry)
        queues: dict[str, deque[Group]] = {}
        for seq in sorted(groups):
            queues.setdefault(groups[seq].key, deque()).append(groups[seq])
        return cls(run_id, queues, max(groups, default=0) + 1, len(entries), size)

    def take(self, key: str) -> Group | None:
        queue = self.queues.get(key)
        return queue.popleft() if queue else None

    def new_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def admit(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Count entries about to be appended against the caps; `journal-cap` failure when they would pass them."""
        listed = list(entries)
        size = sum(len(cbor2.dumps(dict(e), canonical=True)) for e in listed)
        if self.count + len(listed) > MAX_JOURNAL_ENTRIES or self.size + size > MAX_JOURNAL_BYTES:
            raise Stop(
                Failed(
                    code="journal-cap",
                    message=f"The script's journal is full ({MAX_JOURNAL_ENTRIES} entries or "
                    f"{MAX_JOURNAL_BYTES // (1024 * 1024)} MiB); do less per run.",
                )
            )
        self.count += len(listed)
        self.size += size


@dataclass
class Frame:
    """One open `ctx.parallel` block. Its thunks run one after another; a thunk that reaches a model child still
    working, a sleep not yet due or an event wait is *pending*: from there every ctx operation of that thunk answers
    `pending` without effect, and the block parks on all of them once every thunk had its turn (`script_waits.park`).
    The next execution replays the thunks."""

    pending: bool = False
    """The current thunk reached unfinished work."""
    any_pending: bool = False
    marks: list[bool] = field(default_factory=list)
    started: bool = False
    """Per finished thunk: whether it was pending."""


@dataclass
class Execution:
    """One execution of a script run: the journal as loaded and what the ctx operations track while it runs."""

    run: RunRecord
    agent: AgentRecord
    journal: Journal
    raised: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Errors handed to the script as RuntimeError, by message, so an uncaught one fails the run with its code."""
    frames: list[Frame] = field(default_factory=list)
    waiting_on: list[str] = field(default_factory=list)
    """Model children still working that pending thunks reached, in order."""
    steps: list[tuple[str, str]] = field(default_factory=list)
    """Open `ctx.step`s, innermost last: `(stepId, label)`."""
    step_count: int = 0
    timers: list[int] = field(default_factory=list)
    """`wakeAt`s of the sleeps pending thunks reached (or the one sleep the script parks on)."""
    waits: list[WaitRow] = field(default_factory=list)
    """Event waits still open that pending thunks reached (or the one the script parks on), in order."""
    wait_labels: dict[str, str] = field(default_factory=dict)
    """The `label` of each open wait, by waitId."""

    @property
    def pending(self) -> bool:
        return bool(self.frames) and self.frames[-1].pending


def child_result(child: RunRecord) -> dict[str, Any]:
    """A model child's end as a journaled result (HARNESS §9.2: output, or canceled / its code / agent-failed)."""
    if child.status == "succeeded":
        return {"status": "ok", "output": child.output}
    if child.status == "canceled":
        return {"status": "error", "error": {"code": "canceled", "message": "The model child was canceled."}}
    error = child.error or {}
    code = str(error.get("code") or "agent-failed")
    return {"status": "error", "error": {"code": code, "message": str(error.get("message") or "The child failed.")}}


__all__ = [
    "MAX_JOURNAL_BYTES",
    "MAX_JOURNAL_ENTRIES",
    "TERMINAL",
    "Answer",
    "Execution",
    "Frame",
    "Group",
    "Journal",
    "Replay",
    "Stop",
    "child_result",
    "json_safe",
    "key_json",
]
