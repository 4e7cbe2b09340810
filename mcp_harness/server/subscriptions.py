"""Live resources: `resources/subscribe` (handshake era) and `subscriptions/listen` (2026-07-28), one watcher for both.

A subscription names resources of one caller (its binding): `harness://plan`, `run:<id>`, `thread:<id>`,
`harness://memory/<path>` and `harness://triggers/<name>`. Each is read once when subscribed, so a resource the
caller may not see is refused like a read (the era's not-found error), and its *version* is noted: something cheap
that moves when the resource does (a run's status and `updated_at`, a session's last event, a plan's JSON, a memory
file's mtime and size; a trigger, or a directory listing, by a digest of its reading). The watcher wakes on every
commit of the database (`console/live.ChangeFeed`, which also sees other processes' commits) and at least every
`RECHECK_S` (memory files edited outside the harness commit nothing), re-reads the versions, and announces the
resources whose version moved — as `notifications/resources/updated`, stamped with the subscription id on a listen
stream. Notifications are level triggers ("read it again"), so a burst of commits costs one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from mcp_harness.addresses import parse_address
from mcp_harness.errors import HarnessError
from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.resources import read_resource
from mcp_harness.resources.catalog import read_resource_sync

if TYPE_CHECKING:
    from mcp_harness.binding import SessionBinding
    from mcp_harness.console.live import ChangeFeed
    from mcp_harness.harness import Harness

logger = logging.getLogger(__name__)

RECHECK_S = 5.0
"""A watcher re-reads its versions at least this often, for changes that commit nothing (a memory file edited by
hand); a commit wakes it at once."""
SUBSCRIBABLE = ("plan", "run", "thread", "memory", "triggers")
SUBSCRIBABLE_FORMS = "harness://plan, run:<id>, thread:<id>, harness://memory/<path>, harness://triggers/<name>"
MAX_SUBSCRIPTIONS = 256
"""Resources one client connection (or one listen stream) may watch."""
MAX_CONNECTIONS = 1000
"""Handshake-era connections watched at once: a client that went away without a failed send (an HTTP session
dropped without DELETE) would otherwise be watched for the life of the process, so the oldest watch makes room."""


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def version_sync(binding: SessionBinding, uri: str) -> object:
    """What moves when the resource at `uri` changes (None when it is gone or not visible now). Blocking."""
    address = parse_address(uri)
    if address is None:
        return None
    try:
        ctx = binding.context_sync(create=False)
        services = ctx.services
        if address.kind == "plan":
            return _digest(services.sessions.get_plan(ctx.session_id)) if ctx.session_id else None
        if address.kind == "run":
            run = ctx.scope.run(services.runs.find(address.rest), address.rest)
            return (run.status, run.updated_at, _digest([run.wait, run.usage, run.plan]))
        if address.kind == "thread":
            session = ctx.scope.session(services.sessions.find(address.rest), address.rest)
            last = services.sessions.events(session.id, last=1)
            return (session.updated_at, session.status, session.title, last[-1].seq if last else 0)
        if address.kind == "memory" and not address.listing:
            stat = (ctx.agent.memory_dir / normalize_memory_path(address.rest)).stat()
            return (stat.st_mtime_ns, stat.st_size)
        # A trigger and its firings, or a directory listing: what it reads as.
        return _digest(read_resource_sync(binding, uri).model_dump(mode="json"))
    except (HarnessError, MCPError, OSError):
        return None


def _check_subscribable(uri: str, protocol_version: str | None) -> None:
    from mcp_harness.resources.catalog import not_found_code

    address = parse_address(uri)
    if address is None or address.kind not in SUBSCRIBABLE:
        raise MCPError(
            types.INVALID_PARAMS if address is not None else not_found_code(protocol_version),
            f"Cannot subscribe to {uri}: live resources are {SUBSCRIBABLE_FORMS}.",
            {"uri": uri},
        )


class Watch:
    """The resources one subscriber watches, each with the version it was last announced at."""

    def __init__(self, hub: Subscriptions, binding: SessionBinding) -> None:
        self._hub = hub
        self.binding = binding
        self.versions: dict[str, object] = {}

    async def add(self, uri: str, protocol_version: str | None) -> None:
        """Watch `uri` from now on; refused like a read when the caller may not read it."""
        _check_subscribable(uri, protocol_version)
        if uri not in self.versions and len(self.versions) >= MAX_SUBSCRIPTIONS:
            raise MCPError(
                types.INVALID_PARAMS, f"At most {MAX_SUBSCRIPTIONS} subscriptions a connection; unsubscribe first."
            )
        await read_resource(self.binding, uri, protocol_version)  # the scope check: the same refusal as a read
        self.versions[uri] = await anyio.to_thread.run_sync(version_sync, self.binding, uri)

    async def changes(self) -> list[str]:
        """Wait until some watched resource's version moves; those resources' URIs."""
        feed = self._hub.feed()
        while True:
            seen = feed.generation
            moved: list[str] = []
            for uri, before in list(self.versions.items()):
                now = await anyio.to_thread.run_sync(version_sync, self.binding, uri)
                if uri in self.versions and now != before:
                    self.versions[uri] = now
                    moved.append(uri)
            if moved:
                return moved
            await feed.changed(seen, RECHECK_S)


class Subscriptions:
    """The server's live-resource hub: handshake-era watches (one per client connection, run in `running()`'s task
    group) and the `subscriptions/listen` handler. The commit feed starts with the first subscription, so `serve`
    pays nothing for it until then."""

    def __init__(self, harness: Harness, bound: Callable[[ServerRequestContext[Any, Any]], Awaitable[SessionBinding]]):
        self._harness = harness
        self._bound = bound
        self._feed: ChangeFeed | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._by_connection: dict[int, tuple[Watch, anyio.CancelScope]] = {}

    def feed(self) -> ChangeFeed:
        if self._feed is None:
            from mcp_harness.console.live import ChangeFeed

            self._feed = ChangeFeed(self._harness.db)
        return self._feed

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                yield
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            self._by_connection.clear()
            if self._feed is not None:
                self._feed.stop()
                self._feed = None

    @staticmethod
    def _connection_key(ctx: ServerRequestContext[Any, Any]) -> int:
        # One watch per client connection: the SDK builds a ServerSession per request around one connection.
        return id(getattr(ctx.session, "_connection", ctx.session))

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        key = self._connection_key(ctx)
        found = self._by_connection.get(key)
        watch = found[0] if found is not None else Watch(self, await self._bound(ctx))
        await watch.add(params.uri, ctx.protocol_version)
        if found is None:
            if self._tg is None:
                raise MCPError(types.INTERNAL_ERROR, "The server is not running its subscriptions.")
            scope = anyio.CancelScope()
            self._by_connection[key] = (watch, scope)
            while len(self._by_connection) > MAX_CONNECTIONS:
                self._by_connection.pop(next(iter(self._by_connection)))[1].cancel()
            self._tg.start_soon(self._announce, key, watch, ctx.session, scope)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        found = self._by_connection.get(self._connection_key(ctx))
        if found is not None:
            found[0].versions.pop(params.uri, None)
            if not found[0].versions:
                found[1].cancel()
        return types.EmptyResult()

    async def _announce(self, key: int, watch: Watch, session: Any, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                while True:
                    for uri in await watch.changes():
                        await session.send_resource_updated(uri)
            except Exception:  # the client hung up: its watch ends with it
                logger.info("ending a resource subscription", exc_info=True)
        if self._by_connection.get(key, (None, None))[0] is watch:
            del self._by_connection[key]

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """One `subscriptions/listen` stream: the acknowledgement first (the resources honored: those the caller
        may read), then `notifications/resources/updated` as they change, every frame tagged with the request id."""
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id.")
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        watch = Watch(self, await self._bound(ctx))
        for uri in params.notifications.resource_subscriptions or []:
            await watch.add(uri, ctx.protocol_version)
        honored = types.SubscriptionFilter(resource_subscriptions=list(watch.versions) or None)
        ack = types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
        await ctx.session.send_notification(
            types.SubscriptionsAcknowledgedNotification(params=ack), related_request_id=ctx.request_id
        )
        if watch.versions:
            while True:
                for uri in await watch.changes():
                    frame = types.ResourceUpdatedNotificationParams(uri=uri, _meta=meta)
                    await ctx.session.send_notification(
                        types.ResourceUpdatedNotification(params=frame), related_request_id=ctx.request_id
                    )
        await anyio.sleep_forever()  # nothing to watch: the stream stays open until the client closes it
        return types.SubscriptionsListenResult(_meta=meta)  # pragma: no cover - the stream ends by cancellation


__all__ = ["RECHECK_S", "SUBSCRIBABLE_FORMS", "Subscriptions", "Watch", "version_sync"]
