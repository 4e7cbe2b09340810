"""The embedded node on the Seed network: push what it signs, pull what others sign (issue 19 points 2, 3).

`Sync` is what the harness builds once (`Harness.sync`) from `[hypermedia]`: the publish hook that owes new blobs to
auto-push servers (`push.PushHook`), the worker that delivers them (`push.Pusher`, run beside the engine), and the
puller `read hm://` and `mcp-harness hm pull` fetch documents with (`pull.Puller`). Every request goes through the
guarded egress; each server's bearer token is read from its sealed secret when a client is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from mcp_harness.config import HmServerSettings, HypermediaSettings, Settings
from mcp_harness.hypermedia.node import Node
from mcp_harness.hypermedia.sync.client import SeedClient
from mcp_harness.hypermedia.sync.pull import Puller, PullReport
from mcp_harness.hypermedia.sync.push import Pusher, PushHook, PushReport
from mcp_harness.store.db import Database
from mcp_harness.store.hm_push import PushQueue
from mcp_harness.web.egress import Egress

if TYPE_CHECKING:
    from mcp_harness.store.secrets import SecretStore

TokenSource = Callable[[str], str]
"""Secret name → the bearer token it holds (the sealed secret store; loads the master key on first use)."""


class Sync:
    """Push and pull for one harness. Building it touches neither the network nor the master key."""

    def __init__(
        self,
        db: Database,
        node: Node,
        settings: HypermediaSettings,
        egress: Egress,
        token: TokenSource,
        **pusher: Any,
    ) -> None:
        self.node = node
        self.settings = settings
        self.servers = list(settings.servers)
        self._egress = egress
        self._token = token
        self.queue = PushQueue(db)
        self.pusher = Pusher(
            db,
            self.servers,
            self.client_for,
            max_request_bytes=settings.max_request_bytes,
            **pusher,
        )
        self.hook = PushHook(db, self.servers, self.pusher.wake)
        self.puller = Puller(node, self.servers, self.client_for)

    def client_for(self, server: HmServerSettings) -> SeedClient:
        token = self._token(server.token_secret) if server.token_secret else None
        return SeedClient(
            self._egress,
            server.url,
            token=token,
            max_bytes=self.settings.max_request_bytes,
            max_blob_bytes=self.settings.max_blob_bytes,
        )

    def server(self, url: str) -> HmServerSettings | None:
        return next((s for s in self.servers if s.url.rstrip("/") == url.rstrip("/")), None)


class SyncHost(Protocol):
    """What `sync_for` builds from (the harness's services)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    @property
    def account_id(self) -> str: ...
    @property
    def web(self) -> Egress: ...
    @property
    def hypermedia(self) -> Node: ...
    @property
    def secrets(self) -> SecretStore: ...


def sync_for(host: SyncHost) -> Sync:
    """The host's own `Sync` when it keeps one (the harness does), else one built for this call."""
    own = getattr(host, "sync", None)
    if isinstance(own, Sync):
        return own
    return Sync(
        host.db,
        host.hypermedia,
        host.settings.hypermedia,
        host.web,
        lambda name: host.secrets.get_value(host.account_id, name).decode(),
    )


__all__ = ["PullReport", "Puller", "PushHook", "PushReport", "Pusher", "Sync", "SyncHost", "TokenSource", "sync_for"]
