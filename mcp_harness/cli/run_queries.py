"""Reads and one cancel over the `runs` table that `RunStore` does not offer yet, for `runs`, `log` and `chat`.

They belong in the store (`store/runs.py`): they live here only until they move. Every function blocks on SQLite
and goes through the store's connection (`harness.db`), so the rules of the store's own methods hold: reads use
`reading()`, the cancel is one `transaction()` per step of `RunEngine.cancel`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import cbor2

from mcp_harness.errors import Conflict
from mcp_harness.runs.records import LIVE

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.runs.records import RunRecord

_TREE_SQL = (
    "WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
    "SELECT r.id FROM runs r JOIN tree t ON r.id = t.id ORDER BY r.depth, r.created_at, r.id"
)


def _parent_session(blob: bytes | None) -> str | None:
    value = None if blob is None else cbor2.loads(blob)
    recorded = value.get("parentSessionId") if isinstance(value, dict) else None
    return recorded if isinstance(recorded, str) else None


def list_runs(
    harness: Harness, *, session_id: str | None = None, statuses: Collection[str] = (), limit: int = 25
) -> list[RunRecord]:
    """The account's runs, newest first. With `session_id`: the runs on that session and the script runs it
    started (a script has no session; its input names the session it reports to)."""
    sql = "SELECT id, session_id, input_cbor FROM runs WHERE account_id = ?"
    args: list[Any] = [harness.account_id]
    if statuses:
        sql += f" AND status IN ({', '.join('?' for _ in statuses)})"
        args += list(statuses)
    if session_id is not None:
        sql += " AND (session_id = ? OR (session_id IS NULL AND kind = 'workflow'))"
        args.append(session_id)
    sql += " ORDER BY created_at DESC, id DESC"
    ids: list[str] = []
    with harness.db.reading() as conn:
        for row in conn.execute(sql, args):
            mine = row["session_id"] == session_id or _parent_session(row["input_cbor"]) == session_id
            if session_id is None or mine:
                ids.append(row["id"])
                if len(ids) >= limit:
                    break
    return [run for rid in ids if (run := harness.runs.find(rid)) is not None]


def tree_ids(harness: Harness, run_id: str) -> list[str]:
    """The run and its descendants (over `parent_run_id`), shallowest first."""
    with harness.db.reading() as conn:
        return [row[0] for row in conn.execute(_TREE_SQL, (run_id,))]


def session_idle(harness: Harness, session_id: str) -> bool:
    """No run on the session, nor any script it started, is queued, claimed, running or waiting."""
    return not list_runs(harness, session_id=session_id, statuses=sorted(LIVE), limit=1)


def script_runs_of(harness: Harness, session_id: str) -> list[RunRecord]:
    """Script runs the session started, oldest first."""
    runs = list_runs(harness, session_id=session_id, limit=1000)
    return [run for run in reversed(runs) if run.kind == "workflow"]


async def cancel_tree(harness: Harness, run_id: str) -> list[RunRecord]:
    """Cancel a run and its live descendants from any process; returns the rows this call canceled.

    `RunEngine.cancel` works without the engine serving here: queued and waiting rows are canceled in the store, and
    a claimed or running row that this process does not execute (a `serve` elsewhere executes it) is settled
    `Canceled` in the store. Terminal is sticky (`RunStore.settle` discards an outcome for a terminal row), so the
    other process's execution ends without recording anything; the terminal effects (a child's result reaching
    its parent) run here, in the cancel's transactions.

    Raises:
        NotFound: no such run.
        Conflict: the run is already terminal.
    """
    run = await harness.engine.offload(harness.runs.get, run_id)
    if run.terminal:
        live = [r for r in await harness.engine.offload(_tree, harness, run_id) if r.status in LIVE]
        more = f"; {len(live)} of its descendants are live: cancel them by id" if live else ""
        ended = "was already canceled" if run.status == "canceled" else f"already {run.status}"
        raise Conflict(f"Run {run_id} {ended}; nothing to cancel{more}.")
    before = {r.id: r for r in await harness.engine.offload(_tree, harness, run_id) if r.status in LIVE}
    await harness.engine.cancel(run_id)
    after = await harness.engine.offload(_tree, harness, run_id)
    return [before[r.id] for r in after if r.id in before and r.status == "canceled"]


def _tree(harness: Harness, run_id: str) -> list[RunRecord]:
    return [run for rid in tree_ids(harness, run_id) if (run := harness.runs.find(rid)) is not None]
