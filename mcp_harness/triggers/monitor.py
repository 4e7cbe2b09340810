"""The activity monitor: each new event of the node's activity feed reaches waiting scripts and fires the matching
comment, mention and site-update triggers (HARNESS §10 `processActivityEvent`), beside the run engine.

It reads the feed (`store/hm_activity.py`) in `seq` order from a durable watermark (`trigger_watermarks`), woken by
`node.on_activity` when this process stores a blob and polling every `poll_interval_s` for blobs other processes
store (the identity CLI, a second `serve`). Blobs ingested from elsewhere are events like any other.

Each event is one transaction: re-read the watermark (another process may have taken the event already), deliver it
to activity waits (`runs/signals.deliver_activity`), fire each matching trigger (`fire.py`, keyed by
`matching.firing_key`, so a comment and its citation twin fire once), then move the watermark past it. A crash
leaves all of it or none, so an event is neither lost nor doubled, and a failure that rolls the transaction back
leaves the watermark before the event, to be retried on the next pass. One trigger's failure is recorded on it and
does not stop the others.

Two rules keep old or self-made activity from firing: a trigger fires only on events observed since it was created
(the watermark starts at the feed's head when the first activity trigger is saved, or the monitor first runs), and
never on activity its own agent signed — an agent answering its own comment, or editing the site it watches, would
otherwise feed itself forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus

from mcp_harness.errors import NotFound
from mcp_harness.identity.identities import IDENTITY_KIND
from mcp_harness.store.triggers import ACTIVITY_FEED
from mcp_harness.triggers.fire import FireHost, fire
from mcp_harness.triggers.matching import ACTIVITY_SOURCES, activity_of, firing_key, matches

if TYPE_CHECKING:
    from mcp_harness.hypermedia.activity import ActivityEvent
    from mcp_harness.store.agents import AgentStore
    from mcp_harness.store.secrets import SecretStore
    from mcp_harness.store.triggers import FiringRecord, TriggerRecord

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 5.0
"""The fallback for other processes' blobs (this process's wake the monitor at once)."""
BATCH = 50


class Feed(Protocol):
    """The activity feed as the monitor reads it (`HmActivityStore`)."""

    def after(self, seq: int, limit: int) -> list[ActivityEvent]: ...
    def latest_seq(self) -> int: ...
    def listen(self, callback: Callable[[], None]) -> None: ...


class MonitorHost(FireHost, Protocol):
    """The stores a firing writes, and the agents' identities (to know what an agent signed itself)."""

    @property
    def agents(self) -> AgentStore: ...
    @property
    def secrets(self) -> SecretStore: ...


class ActivityMonitor:
    """Evaluates new activity for one account while `serve` runs."""

    def __init__(
        self,
        host: MonitorHost,
        feed: Feed,
        *,
        account_id: str,
        wake_engine: Callable[[], None],
        poll_interval_s: float = POLL_INTERVAL_S,
        batch: int = BATCH,
    ) -> None:
        self.host = host
        self.feed = feed
        self.account_id = account_id
        self.wake_engine = wake_engine
        self.poll_interval_s = poll_interval_s
        self.batch = batch
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup = anyio.Event()
        feed.listen(self._notify)

    def _notify(self) -> None:
        # On the committing thread, under the database lock: only schedule the wake-up on the loop, never wait.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self._wakeup.set()

    # -- one pass --------------------------------------------------------------------------------------------

    def watermark(self) -> int:
        """Where the monitor resumes; the feed's head when it has never run. Blocking."""
        store = self.host.triggers
        store.ensure_watermark(self.account_id)
        mark = store.watermark(self.account_id, ACTIVITY_FEED)
        return 0 if mark is None else mark

    def tick(self) -> tuple[list[FiringRecord], bool, bool]:
        """One batch: the firings made, whether anything was delivered or fired (the engine has work), and whether
        the batch was full (more may be waiting). Blocking."""
        events = self.feed.after(self.watermark(), self.batch)
        fired: list[FiringRecord] = []
        woke = False
        identities: dict[str, frozenset[str]] = {}
        for event in events:
            made, delivered = self.evaluate(event, identities)
            fired += made
            woke = woke or delivered or bool(made)
        return fired, woke, len(events) >= self.batch

    def evaluate(
        self, event: ActivityEvent, identities: dict[str, frozenset[str]] | None = None
    ) -> tuple[list[FiringRecord], bool]:
        """Deliver one event and fire what it matches, then move the watermark past it: one transaction. Returns
        the firings and whether a waiting script was delivered to. Blocking."""
        from mcp_harness.runs.signals import deliver_activity

        host, store = self.host, self.host.triggers
        cache = identities if identities is not None else {}
        fired: list[FiringRecord] = []
        delivered: list[str] = []
        with host.db.transaction():
            mark = store.watermark(self.account_id, ACTIVITY_FEED)
            if mark is not None and mark >= event.seq:
                return [], False  # another process took this event
            try:
                with host.db.transaction():
                    delivered = deliver_activity(host.runs, event)
            except Exception:  # a delivery that cannot be journaled must not keep the triggers from the event
                logger.exception("Delivering activity %s to waiting runs failed", event.key)
            for trigger in store.enabled_of_types(self.account_id, ACTIVITY_SOURCES):
                if not self._fires(trigger, event, cache):
                    continue
                try:
                    with host.db.transaction():
                        record = fire(
                            host,
                            trigger=trigger,
                            dedupe_key=firing_key(event.key),
                            activity=activity_of(event),
                            summary=event.summary,
                        )
                except Exception as exc:  # recorded on the trigger; the event still reaches the others
                    logger.exception("Firing trigger %s for activity %s failed", trigger.id, event.key)
                    store.set_error(trigger.id, f"Could not fire for activity {event.key}: {exc}")
                    continue
                if record is not None:
                    fired.append(record)
            store.set_watermark(self.account_id, ACTIVITY_FEED, event.seq)
        return fired, bool(delivered)

    def _fires(self, trigger: TriggerRecord, event: ActivityEvent, cache: dict[str, frozenset[str]]) -> bool:
        if event.observed_at < trigger.created_at or not matches(trigger.source, event):
            return False
        own = cache.get(trigger.agent_id)
        if own is None:
            own = cache[trigger.agent_id] = agent_accounts(self.host, trigger.agent_id)
        if event.author in own:
            logger.info("Trigger %s skipped activity %s: its own agent signed it", trigger.id, event.key)
            return False
        return True

    # -- serving ---------------------------------------------------------------------------------------------

    async def run_once(self) -> list[FiringRecord]:
        """Passes until the feed is read to its end; wakes the engine for what was delivered or fired."""
        fired: list[FiringRecord] = []
        while True:
            batch, woke, more = await anyio.to_thread.run_sync(self.tick)
            fired += batch
            if woke:
                self.wake_engine()
            if not more:
                return fired

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Evaluate new activity until cancelled. Start it with `tg.start`, after the engine's boot sweep."""
        self._loop = asyncio.get_running_loop()
        try:
            try:
                await anyio.to_thread.run_sync(self.watermark)  # the baseline: what is already there never fires
            except Exception:  # retried by the first pass; the monitor must never take the engine down with it
                logger.exception("The activity monitor could not read its watermark; trying again shortly")
            task_status.started()
            while True:
                # A fresh event before reading, so a blob stored during the pass wakes the next wait at once.
                self._wakeup = anyio.Event()
                try:
                    await self.run_once()
                except Exception:  # the monitor outlives a failed pass (a locked database, a full disk)
                    logger.exception("An activity monitor pass failed; trying again shortly")
                with anyio.move_on_after(self.poll_interval_s):
                    await self._wakeup.wait()
        finally:
            self._loop = None


def agent_accounts(host: MonitorHost, agent_id: str) -> frozenset[str]:
    """The accounts of every identity the agent signs as (metadata only: the master key is not needed)."""
    try:
        agent = host.agents.get(agent_id)
    except NotFound:
        return frozenset()
    definition = agent.definition
    names = [n for n in (definition.signing_key, *definition.signing_keys) if n]
    accounts: set[str] = set()
    for name in names:
        record = host.secrets.find(agent.account_id, name)
        account = record.metadata.get("accountId") if record is not None and record.kind == IDENTITY_KIND else None
        if isinstance(account, str) and account:
            accounts.add(account)
    return frozenset(accounts)


__all__ = ["BATCH", "POLL_INTERVAL_S", "ActivityMonitor", "Feed", "MonitorHost", "agent_accounts"]
