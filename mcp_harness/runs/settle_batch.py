"""Siblings settled together: the deliveries of children that end in one batch, made once per parent.

Why: in a wide fan-out the ten leaves of a parent end within a few milliseconds of each other, and each leaf's
settle paid the parent's side of it alone: the parent's session and status, the scan of its answered calls, an
append to its session (the next sequence number, the session's `updated_at`), the delete of an open call. The
store lane runs the leaves' last replies as one batch (`AgentExecutor._record_replies`); inside `grouped`, the
engine's terminal effects hold each child's delivery back, and at the end of the batch each parent gets all its
children's results in one append, one status read, one answered-calls scan and at most one requeue.

What stays as it was: a delivery is still in the transaction of the child's terminal commit (the batch's), so a
crash cannot land between the two; it still checks for an existing result first, so one already delivered leaves a
late notice instead; a failed delivery still leaves the terminal commits standing (its own savepoint, logged), for
the boot reconciliation to redo. Children that are not an agent parent's delegate calls (a script's children, an
MCP client's own delegate waiting in this process) are delivered one by one, as `deliver` always did.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from mcp_harness.runs.resolve import deliver, deliver_siblings_in

if TYPE_CHECKING:
    from mcp_harness.runs.resolve import RunHost
    from mcp_harness.store.runs import RunRecord

logger = logging.getLogger(__name__)

_held: ContextVar[list[RunRecord] | None] = ContextVar("held_deliveries", default=None)


def hold(child: RunRecord) -> bool:
    """Inside `grouped`: keep `child`'s delivery for the end of the batch (True); outside, False (deliver now)."""
    held = _held.get()
    if held is None:
        return False
    held.append(child)
    return True


@contextmanager
def grouped(host: RunHost) -> Iterator[None]:
    """Deliveries held back (`hold`) inside, made at the end, in the caller's open transaction; nothing when the
    body raises (its transaction rolls back with the children's terminal commits)."""
    held: list[RunRecord] = []
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
    if held:
        _guarded(held[0].id, lambda: _in_savepoint(host, held))


def _in_savepoint(host: RunHost, held: list[RunRecord]) -> None:
    # A failed statement must not poison the batch's transaction (PostgreSQL aborts it): a savepoint around all.
    with host.db.transaction():
        deliver_all(host, held)


def deliver_all(host: RunHost, children: list[RunRecord]) -> None:
    """Each parent's children delivered together; each parent's delivery in a savepoint of its own, whose failure
    is logged and leaves the terminal commits standing (as the engine's savepoint around one child's did)."""
    alone: list[RunRecord] = []
    with_session = [c.session_id for c in children if c.session_id is not None]
    parents = host.sessions.parents_of(with_session) if with_session else {}
    by_parent: dict[tuple[str, str], list[RunRecord]] = {}
    for child in children:
        parent_session = parents.get(child.session_id) if child.session_id is not None else None
        if (
            child.parent_tool_call_id is None
            or child.parent_run_id is None
            or parent_session is None
            or child.id in host.awaited_children
        ):
            alone.append(child)
        else:
            by_parent.setdefault((child.parent_run_id, parent_session), []).append(child)
    for child in alone:
        _guarded(child.id, lambda child=child: deliver(host, child))
    for (parent_run_id, parent_session), siblings in by_parent.items():

        def together(
            parent_run_id: str = parent_run_id, session: str = parent_session, siblings: Any = siblings
        ) -> None:
            with host.db.transaction() as conn:
                deliver_siblings_in(host, conn, parent_run_id, session, siblings)

        _guarded(parent_run_id, together)


def _guarded(what: str, fn: Any) -> None:
    try:
        fn()
    except Exception:  # the terminal commits stand; the boot reconciliation redoes what was lost
        logger.exception("Delivering results for run %s failed", what)


__all__ = ["deliver_all", "grouped", "hold"]
