"""The mounted MCP servers' lifecycle for one harness: the pool built on first use, kept warm in the engine's task
group while it runs, the never-listed servers started shortly after, everything closed when the engine stops.

This module imports no MCP client itself (the pool loads on first use or in the warm-up's worker thread), so the
harness can hold one from the start without a stdio cold start paying for the SDK's client.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from mcp_harness.errors import HarnessError

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from mcp_harness.callables.upstream import ServerSpec, UpstreamTool
    from mcp_harness.store.upstream import SyncReport
    from mcp_harness.store.upstream_tools import UpstreamStore
    from mcp_harness.upstream.pool import UpstreamPool

logger = logging.getLogger(__name__)


class Mounts:
    """The pool over `servers()` (mounted servers by name), reading secrets with `secret(name)` and keeping each
    server's tool documents in `store()`."""

    def __init__(
        self,
        servers: Callable[[], dict[str, ServerSpec]],
        secret: Callable[[str], str],
        store: Callable[[], UpstreamStore],
        warm_after_s: float,
    ) -> None:
        self._servers = servers
        self._secret = secret
        self._store = store
        self._warm_after_s = warm_after_s
        self._pool: UpstreamPool | None = None
        self._tg: TaskGroup | None = None

    def pool(self) -> UpstreamPool:
        """The client side, built on first use; attached to the engine's task group if it runs."""
        if self._pool is None:
            from mcp_harness.upstream.pool import UpstreamPool

            self._pool = UpstreamPool(self._servers, self._secret, self._sync_tools)
            if self._tg is not None:
                self._pool.attach(self._tg)
        return self._pool

    def attach(self, tg: TaskGroup) -> None:
        """The engine started: connections live in its task group from now on, and the warm-up is scheduled."""
        self._tg = tg
        if self._pool is not None:
            self._pool.attach(tg)
        tg.start_soon(self._warm)

    async def aclose(self) -> None:
        self._tg = None
        if self._pool is not None:
            with anyio.CancelScope(shield=True):
                await self._pool.aclose()

    def _sync_tools(self, server: str, tools: list[UpstreamTool]) -> SyncReport:
        from mcp_harness.callables.upstream import mcp_document

        report = self._store().sync_tools(server, [mcp_document(t) for t in tools])
        if report.added or report.changed or report.removed:
            logger.info("MCP server %s tools: %s", server, report.to_json())
        return report

    async def _warm(self) -> None:
        """A little after start, servers whose tools were never listed are started (and so kept warm), so their
        documents exist before anyone lists `~/tools/`; the others wait for their first call."""
        await anyio.sleep(self._warm_after_s)

        def unlisted() -> list[str]:
            try:
                return [n for n in self._servers() if not self._store().has_tools(n)]
            except HarnessError as exc:
                logger.warning("%s", exc.message)
                return []

        names = await anyio.to_thread.run_sync(unlisted)
        if names:
            await anyio.to_thread.run_sync(importlib.import_module, "mcp_harness.upstream.pool")
            await self.pool().warm(names)
