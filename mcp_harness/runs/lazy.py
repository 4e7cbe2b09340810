"""Executors built on first use, so what they import is not paid at start-up."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_harness.runs.engine import Executor
    from mcp_harness.runs.outcomes import Outcome
    from mcp_harness.runs.records import RunRecord


class LazyExecutor:
    """An executor built when its first run executes (or settles): the agent loop and the script VM, and all they
    import, are not paid by a stdio server's start-up, which starts the engine before it answers the handshake."""

    def __init__(self, make: Callable[[], Executor]) -> None:
        self._make = make
        self._built: Executor | None = None

    def executor(self) -> Executor:
        """The executor itself, built now if no run has needed it yet."""
        if self._built is None:
            self._built = self._make()
        return self._built

    async def __call__(self, run: RunRecord) -> Outcome:
        return await self.executor()(run)

    @property
    def settles_atomically(self) -> bool:
        """As the executor it builds says (see `Executor`)."""
        return bool(getattr(self.executor(), "settles_atomically", False))

    def settled(self, run: RunRecord) -> None:
        """Both executors settle their runs' effects in the terminal commit (see `Executor`)."""
        settle = getattr(self.executor(), "settled", None)
        if settle is not None:
            settle(run)
