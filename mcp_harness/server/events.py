"""Resumable SSE in the handshake era: every event gets an `id:`, and a client whose stream dropped reconnects with
`Last-Event-ID` and receives what it missed (spec: Streamable HTTP, "Resumability and Redelivery").

The SDK's session manager hands one `EventStore` to every session, and its stream ids are request ids, which repeat
across sessions; so each session gets its own `EventLog`, created when the session is admitted and dropped when the
session ends, however it ends (DELETE, idle timeout, crash). A log keeps the newest events within a count and a byte
budget, and all logs share a total byte budget (the least recently written give way first), so a client that never
reads cannot grow the server. Eviction is oldest first, so a replay is whole or refused, never a gap.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

MAX_EVENTS_PER_SESSION = 1000
MAX_BYTES_PER_SESSION = 8 * 1024 * 1024
MAX_BYTES_TOTAL = 64 * 1024 * 1024
SSE_RETRY_MS = 2000
"""The `retry:` the priming event of every stream suggests: how long a client waits before reconnecting."""


@dataclass(slots=True)
class _Event:
    seq: int
    stream_id: str
    json: bytes | None  # None: the priming event a stream starts with (no message)


@dataclass(eq=False)
class EventLog(EventStore):
    """One session's events, oldest first."""

    budget: EventBudget
    session_id: str | None = None
    events: deque[_Event] = field(default_factory=lambda: deque())
    bytes: int = 0
    closed: bool = False
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> EventId:
        if self.closed:  # the session has ended: nothing will replay this
            return str(next(self._seq))
        data = (
            None
            if message is None
            else types.jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True)
        )
        event = _Event(next(self._seq), stream_id, data)
        self.events.append(event)
        self.bytes += len(data or b"")
        self.budget.total += len(data or b"")
        while len(self.events) > MAX_EVENTS_PER_SESSION or self.bytes > MAX_BYTES_PER_SESSION:
            self.evict_oldest()
        self.budget.written(self)
        return str(event.seq)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> str | None:
        """Replay the stream `last_event_id` belongs to from just after it; None when that event is not (or no
        longer) here, since a replay with a hole would be worse than none."""
        # Sequence numbers run on without gaps from the oldest kept event, so the cursor's place is arithmetic.
        start = int(last_event_id) - self.events[0].seq if last_event_id.isdigit() and self.events else -1
        if not 0 <= start < len(self.events):
            return None
        stream_id = self.events[start].stream_id
        later = [e for e in itertools.islice(self.events, start + 1, None) if e.stream_id == stream_id]
        for event in later:
            if event.json is not None:
                message = types.jsonrpc_message_adapter.validate_json(event.json, by_name=False)
                await send_callback(EventMessage(message, str(event.seq)))
        return stream_id

    def evict_oldest(self) -> None:
        size = len(self.events.popleft().json or b"")
        self.bytes -= size
        self.budget.total -= size


@dataclass
class EventBudget:
    """Every open session's log, least recently written first, under one byte budget."""

    logs: OrderedDict[str, EventLog] = field(default_factory=lambda: OrderedDict())
    total: int = 0

    def adopt(self, session_id: str, log: EventLog) -> None:
        log.session_id = session_id
        self.logs[session_id] = log

    def drop(self, session_id: str) -> None:
        log = self.logs.pop(session_id, None)
        if log is not None:
            self.total -= log.bytes
            log.events.clear()
            log.bytes = 0
            log.closed = True

    def written(self, log: EventLog) -> None:
        if log.session_id in self.logs:
            self.logs.move_to_end(log.session_id)
        for other in list(self.logs.values()):
            while self.total > MAX_BYTES_TOTAL and other.events:
                other.evict_oldest()
            if self.total <= MAX_BYTES_TOTAL:
                break


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, giving each session its own event log and dropping it with the session."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.event_logs = EventBudget()

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # The transport takes `self.event_store` as it is built: lend it this session's log for that moment (there
        # is no await in between, so no other admission can see it).
        log = EventLog(self.event_logs)
        self.event_store = log
        try:
            transport = super()._admit_session(requestor)
        finally:
            self.event_store = None
        if transport is not None and transport.mcp_session_id is not None:
            self.event_logs.adopt(transport.mcp_session_id, log)
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        # Every way a session ends (DELETE, idle timeout, crash, a refused opening request) passes through here.
        self.event_logs.drop(session_id)
        await super()._discard_session(session_id, transport)


__all__ = [
    "MAX_BYTES_PER_SESSION",
    "MAX_BYTES_TOTAL",
    "MAX_EVENTS_PER_SESSION",
    "SSE_RETRY_MS",
    "EventBudget",
    "EventLog",
    "SessionManager",
]
