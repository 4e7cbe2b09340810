"""`tools/call` answered on the stdio wire beside the SDK's request pipeline, for the calls it adds nothing to.

Why: on a 2026-07-28 connection the SDK builds a `Connection` and a `ServerRunner` for every request, classifies its
envelope, validates its params twice, composes the middleware chain, sieves the result and relays every frame
through one more memory stream: about a fifth of what the harness added to a relayed upstream call's latency
(issue 20, target ≤ +2 ms p50 over stdio).

Which calls: `tools/call` of a verb other than `delegate` (its 2026-07-28 form rides input requests, which only the
SDK's pipeline carries), on a connection the SDK serves in the 2026-07-28 era, with nothing in its params but the
tool's name, its arguments and the request envelope: no progress token, no request state, no trace context. The
envelope and the params still pass the SDK's own checks (`classify_inbound_request`, `validate_client_request`).
Every other message goes to the SDK unchanged, so a request the SDK would refuse gets the SDK's own error.

The answer is `answer`'s, the same handler path as `on_call_tool`'s, shaped as the SDK's `ServerRunner._serialize`
shapes it (the per-version result sieve, `resultType`, the `serverInfo` stamp); a failure maps through the SDK's
`modern_error_data`. A call the client cancels (`notifications/cancelled`) is cancelled and gets no reply, as in the
SDK. What these calls skip is the SDK's middleware, so they open no OpenTelemetry span.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import mcp_types as types
from mcp.server.runner import modern_error_data
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

logger = logging.getLogger(__name__)

METHOD = "tools/call"
ENVELOPE_KEYS = frozenset(
    {types.PROTOCOL_VERSION_META_KEY, types.CLIENT_INFO_META_KEY, types.CLIENT_CAPABILITIES_META_KEY}
)
PARAM_KEYS = frozenset({"name", "arguments", "_meta"})

CLOSED_WRITE_S = 1.0
"""How long a shutdown's "Connection closed" reply may take to write (the SDK's bound too)."""

Answer = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""A verb call's `CallToolResult` in its wire form (camelCase, nothing null), for the SDK's serializer to sieve."""
Carrying = Callable[[Any], AbstractContextManager[None]]
"""While answering: what the request's envelope says the client can carry (its raw `clientCapabilities`)."""


def closed_reply(request_id: types.RequestId) -> bytes:
    """The reply to a request cut short by shutdown, as the SDK's dispatcher sends it."""
    error = {"code": types.CONNECTION_CLOSED, "message": "Connection closed"}
    return _line({"jsonrpc": "2.0", "id": request_id, "error": error})


def _line(frame: dict[str, Any]) -> bytes:
    return (json.dumps(frame, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def opens_modern(message: types.JSONRPCRequest) -> bool:
    """Whether a connection's first request puts it in the 2026-07-28 era, as the SDK's dual-era loop decides."""
    meta = (message.params or {}).get("_meta")
    return message.method != "initialize" and isinstance(meta, Mapping) and types.PROTOCOL_VERSION_META_KEY in meta


class WireCalls:
    """Which calls are answered on the wire, and their reply lines."""

    def __init__(
        self, answer: Answer, names: frozenset[str], server_info: Callable[[], dict[str, Any]], carrying: Carrying
    ) -> None:
        self._answer = answer
        self._names = names
        self._server_info = server_info
        self._stamp: dict[str, Any] | None = None
        """The server's identity, dumped once: the SDK copies it per response so that no caller can change the one
        stamped into the next, and a stamp here is only ever encoded."""
        self._carrying = carrying

    def takes(self, message: types.JSONRPCRequest) -> tuple[str, Any] | None:
        """The protocol version and client capabilities to answer `message` with here; None: the SDK answers it."""
        params = message.params
        if message.method != METHOD or not params or not params.keys() <= PARAM_KEYS:
            return None
        name, meta = params.get("name"), params.get("_meta")
        if not isinstance(name, str) or name not in self._names or not isinstance(params.get("arguments", {}), dict):
            return None
        if not isinstance(meta, Mapping) or not meta.keys() <= ENVELOPE_KEYS:
            return None
        route = classify_inbound_request({"method": METHOD, "params": params})
        if isinstance(route, InboundLadderRejection) or route.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        try:
            methods.validate_client_request(METHOD, route.protocol_version, params)
        except Exception:  # the SDK says what is wrong with it
            return None
        return route.protocol_version, route.client_capabilities

    async def reply(self, message: types.JSONRPCRequest, version: str, capabilities: Any) -> bytes:
        """The response line to `message`, as the SDK would send it. Cancellation propagates (no reply)."""
        params = message.params or {}
        logger.debug("answering request %r (%s) on the wire", message.id, params["name"])
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": message.id}
        try:
            with self._carrying(capabilities):
                result = await self._answer(params["name"], dict(params.get("arguments") or {}))
            frame["result"] = self._serialize(version, result)
        except Exception as exc:
            frame["error"] = modern_error_data(exc).model_dump(by_alias=True, mode="json", exclude_none=True)
        return _line(frame)

    def _serialize(self, version: str, result: dict[str, Any]) -> dict[str, Any]:
        try:
            dumped = methods.serialize_server_result(METHOD, version, result)
        except ValidationError:  # a server bug, not the client's fault: the SDK's answer for it
            logger.exception("the answer to a tools/call on the wire is not a valid result")
            raise MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result") from None
        if "content" not in dumped:  # the sieve fell back to another result type, dropping what the answer said
            logger.error("the answer to a tools/call on the wire is not a CallToolResult: %.300s", json.dumps(result))
            raise MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result")
        if dumped.get("resultType") is None:
            dumped["resultType"] = "complete"
        meta = dumped.get("_meta")
        if meta is None:
            dumped["_meta"] = {types.SERVER_INFO_META_KEY: self._identity()}
        elif isinstance(meta, dict) and meta.get(types.SERVER_INFO_META_KEY) is None:
            dumped["_meta"] = {**meta, types.SERVER_INFO_META_KEY: self._identity()}
        return dumped

    def _identity(self) -> dict[str, Any]:
        if self._stamp is None:
            self._stamp = self._server_info()
        return self._stamp
