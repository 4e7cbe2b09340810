"""`tools/call` on a stdio server's pipe, beside the SDK's client session rather than through it.

Why: a call relayed through the SDK's `Client` cost the harness about what a whole direct call costs its caller
(typed request and result models, the dispatcher's task and memory streams per request, a re-validation of the
result against the output schema although we pass it on unchanged), most of what `call` of an upstream tool added
over calling it directly (issue 20's +2 ms). The session still owns the connection: it negotiates the era, lists
tools, holds the `subscriptions/listen` stream and answers whatever the server asks. Only `tools/call` takes this
path: its request goes down the same pipe (`stdio_pipe.py`) with an id the SDK never uses (`mh-<n>`; the SDK
counts integers), and `take`, offered every line the server writes, keeps the answers and their progress from the
session. The era's `_meta` stamp is the session's own, so a 2026-07-28 server sees what the SDK would send.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

logger = logging.getLogger(__name__)

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
Stamp = Callable[[dict[str, Any], Any], None]
"""The session's era stamp: it adds the 2026-07-28 `_meta` to a request (and HTTP headers to options we drop)."""
SendLine = Callable[[bytes], Awaitable[None]]
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]

ID_PREFIX = "mh-"
_MARK = b'"mh-'
"""In every line that can be ours (an answer's id, a progress token): lines without it are never decoded here."""


@dataclass(slots=True)
class _Pending:
    progress: ProgressFn | None
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: MCPError | None = None


def closed_error() -> MCPError:
    """What the SDK raises for a call whose connection went away (the pool maps it to "interrupted")."""
    return MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")


class LeanCalls:
    """The calls in flight on one pipe. `take` and `closed` are the reader's; `call_tool` the callers'."""

    def __init__(self, send: SendLine, spawn: Spawn) -> None:
        """`spawn`: where a progress report runs (the pipe's task group), never in the reader, which a slow or failing
        report would hold up or kill for every other call on the server (the SDK gives each its own task too)."""
        self._send = send
        self._spawn = spawn
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._closed = False

    def take(self, line: bytes) -> bool:
        """Whether `line` answered, or reported progress on, one of our calls (then it is not the session's)."""
        if not self._pending or _MARK not in line:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False  # the session reports what is not JSON
        if not isinstance(message, dict):
            return False
        ident = message.get("id")
        if isinstance(ident, str) and "method" not in message:
            pending = self._pending.get(ident)
            if pending is None:
                return False
            if "error" in message:
                pending.error = _error(message["error"])
            else:
                pending.result = message.get("result")
            pending.done.set()
            return True
        if message.get("method") == "notifications/progress":
            params = message.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            pending = self._pending.get(token) if isinstance(token, str) else None
            if pending is None or not isinstance(params, dict):
                return False
            done, total, text = params.get("progress"), params.get("total"), params.get("message")
            if pending.progress is not None and isinstance(done, int | float):
                total = float(total) if isinstance(total, int | float) else None
                text = text if isinstance(text, str) else None
                self._spawn(partial(_safely, pending.progress, float(done), total, text))
            return True
        return False

    def closed(self) -> None:
        """The pipe ended: every call in flight fails as the SDK's would, "connection closed"."""
        self._closed = True
        for pending in self._pending.values():
            pending.error = closed_error()
            pending.done.set()

    async def call_tool(self, stamp: Stamp, name: str, arguments: dict[str, Any], progress: ProgressFn | None) -> Any:
        """The raw `result` of `tools/call` `name` (the caller checks that it is one).

        Raises:
            MCPError: the server answered a JSON-RPC error, or the connection closed before it answered.
        """
        if self._closed:
            raise closed_error()
        ident = f"{ID_PREFIX}{next(self._ids)}"
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
        stamp(request, {})
        if progress is not None:
            params.setdefault("_meta", {})["progressToken"] = ident
        pending = self._pending[ident] = _Pending(progress)
        try:
            await self._send(_line(request))
            await pending.done.wait()
        except anyio.get_cancelled_exc_class():
            if not pending.done.is_set():
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    await self._cancel(ident)
            raise
        finally:
            self._pending.pop(ident, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def _cancel(self, ident: str) -> None:
        """Tell the server we gave up (`notifications/cancelled`, the stdio wire's spelling in both eras)."""
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}}
        try:
            await self._send(_line(notice))
        except MCPError:
            pass


async def _safely(progress: ProgressFn, done: float, total: float | None, text: str | None) -> None:
    try:
        await progress(done, total, text)
    except Exception:  # a report that could not be relayed is lost; the call goes on
        logger.warning("relaying an upstream server's progress failed", exc_info=True)


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _error(error: Any) -> MCPError:
    if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
        return MCPError(code=error["code"], message=error["message"], data=error.get("data"))
    return MCPError(code=types.INTERNAL_ERROR, message=f"a malformed JSON-RPC error: {json.dumps(error)[:200]}")
