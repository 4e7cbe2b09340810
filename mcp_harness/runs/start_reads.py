"""What the starts of runs claimed together read, read once for all of them (`AgentExecutor._starts`).

Why: a fan-out's hundred leaves are claimed in one pass and started in one lane call, and each start read its run's
status, its session's open calls, log, plan and touched callables, and its root's origin: six statements a leaf,
six hundred in the lane between the last spawn and the last leaf's model call. Here each is one statement for the
batch.

Why it stays true: the reads run inside the starts' own lane call, so no claim, spawn, reply or delivery of this
engine lands between them and the starts. The one write a start makes, answering its session's interrupted calls
(`reconcile_session`), changes only that session's log: a session with a call open is therefore read again by its
own start, after that write, as a start alone would read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.services import Stores
    from mcp_harness.store.sessions import EventRecord


@dataclass(frozen=True, slots=True)
class SessionReads:
    """A session's log, plan and touched callables as its run's first request needs them."""

    events: list[EventRecord]
    plan: dict[str, Any] | None
    touched: set[str]


@dataclass(frozen=True, slots=True)
class StartReads:
    states: dict[str, tuple[str, dict[str, Any] | None]]
    """Each run's status and wait (a missing run is absent)."""
    open: set[str]
    """The sessions with a call open: their starts reconcile them first, then read them alone."""
    sessions: dict[str, SessionReads]
    """The other sessions' reads."""
    client_roots: set[str]
    """The roots among the runs' roots that an MCP client's `delegate` started (`RunStore.started_by_client`)."""

    @classmethod
    def of(cls, stores: Stores, runs: Sequence[RunRecord]) -> StartReads:
        """One read of each kind for all of `runs`. Blocking."""
        session_ids = list(dict.fromkeys(r.session_id for r in runs if r.session_id is not None))
        open_ = stores.sessions.with_open_calls(session_ids)
        quiet = [s for s in session_ids if s not in open_]
        events = stores.sessions.events_of(quiet)
        plans = stores.sessions.plans_of(quiet)
        touched = stores.sessions.touched_of(quiet)
        return cls(
            states=stores.runs.statuses_of([r.id for r in runs]),
            open=open_,
            sessions={s: SessionReads(events[s], plans.get(s), touched.get(s, set())) for s in quiet},
            client_roots=stores.runs.started_by_client_among([r.root_run_id for r in runs if r.root_run_id != r.id]),
        )

    def of_session(self, session_id: str) -> SessionReads | None:
        """The session's reads, or None when its start must read it itself (it had a call open)."""
        return self.sessions.get(session_id)


__all__ = ["SessionReads", "StartReads"]
