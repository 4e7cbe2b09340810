"""`GET /healthz` for load balancers: is the store reachable and this replica's run engine alive.

200 `{"store": "ok", "engine": "alive"}`, else 503 with what is wrong, in the same two words each
(`"store": "unreachable"`, `"engine": "stopped" | "stalled"`). It needs no token and says nothing else: no
version, no counts, no error text (that goes to the log), so an open health port tells a stranger only that the
replica is up. The engine counts as alive by the heartbeat it writes to the store (`store/instances.py`), which is
also how the other replicas judge it: a pump that stopped beating is stalled even if the process still answers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_harness.store._util import now_ms

if TYPE_CHECKING:
    from mcp_harness.harness import Harness

logger = logging.getLogger(__name__)

STORE_TIMEOUT_S = 5.0
"""A store that does not answer within this is unreachable, as far as a load balancer should care."""
STALLED_BEATS = 3
"""An engine whose last heartbeat is older than this many of its beats (`[runs] heartbeat_s`) has stopped pumping."""


def _heartbeat(harness: Harness, owner: str | None) -> int | None:
    """The engine's last heartbeat (epoch ms), None when it has none; reading it also proves the store answers."""
    with harness.db.reading() as conn:
        if owner is None:
            conn.execute("SELECT 1").fetchone()
            return None
        row = conn.execute("SELECT heartbeat_at FROM instances WHERE id = ?", (owner,)).fetchone()
    return None if row is None else int(row[0])


async def health(harness: Harness) -> tuple[bool, dict[str, str]]:
    """(healthy, the two-word report)."""
    owner = harness.engine_owner
    store, beat = "ok", None
    try:
        with anyio.fail_after(STORE_TIMEOUT_S):
            beat = await anyio.to_thread.run_sync(_heartbeat, harness, owner, abandon_on_cancel=True)
    except Exception:  # any failure to read is the answer: unreachable (the reason is for the log, not the caller)
        logger.warning("health check: the store did not answer", exc_info=True)
        store = "unreachable"
    if owner is None:
        engine = "stopped"
    elif store != "ok":
        engine = "unknown"
    else:
        stalled_after = STALLED_BEATS * harness.engine.heartbeat_ms
        engine = "alive" if beat is not None and now_ms() - beat < stalled_after else "stalled"
    return (store, engine) == ("ok", "alive"), {"store": store, "engine": engine}


CACHE_S = 1.0
"""A probe within this of the last check gets its answer: a flood of unauthenticated probes costs the store one
read a second, not a pooled connection (and a worker thread) each."""


def health_routes(harness: Harness) -> list[Route]:
    lock = anyio.Lock()
    last: list[tuple[float, tuple[bool, dict[str, str]]]] = []

    async def checked() -> tuple[bool, dict[str, str]]:
        async with lock:  # one check in flight; the probes queued behind it take its answer
            if not last or anyio.current_time() - last[0][0] >= CACHE_S:
                last[:] = [(anyio.current_time(), await health(harness))]
            return last[0][1]

    async def healthz(_: Request) -> Response:
        healthy, report = await checked()
        headers = {"Cache-Control": "no-store"}
        return JSONResponse(report, status_code=200 if healthy else 503, headers=headers)

    return [Route("/healthz", endpoint=healthz, methods=["GET"])]


__all__ = ["STALLED_BEATS", "health", "health_routes"]
