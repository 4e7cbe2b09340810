"""`POST /mcp/sessions/{id}/attachments`: upload one file to a conversation over HTTP (issue 18).

The request body is the file itself, raw (no multipart): `Content-Type` is its MIME type (left out or
`application/octet-stream`: taken from the bytes, else the name) and the `X-Filename` header its name
(percent-encoded UTF-8 is decoded), e.g.

    curl --data-binary @photo.png -H 'Content-Type: image/png' -H 'X-Filename: photo.png' \\
         -H 'Authorization: Bearer …' http://127.0.0.1:8765/mcp/sessions/<id>/attachments

It answers 201 with the attachment (`{id, sessionId, name, mimeType, size, createdAt, address}`). The route sits
behind the guard `/mcp` has (Host, Origin, bearer token) and the session rule of `scope.py`: a token scoped to one
agent uploading to another agent's session gets the 404 an unknown session gets. The body streams to disk as it
arrives (`AttachmentStore.add`): a `Content-Length` over 100 MiB is refused before a byte is read, a longer chunked
body as soon as it passes the limit, and nothing of a refused upload is kept.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
import anyio.from_thread
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Send
from starlette.types import Scope as AsgiScope

from mcp_harness.errors import HarnessError, TooLarge
from mcp_harness.store.attachments import MAX_ATTACHMENT_BYTES

if TYPE_CHECKING:
    from mcp_harness.config import TokenSettings
    from mcp_harness.harness import Harness

logger = logging.getLogger(__name__)

Admit = Callable[..., Awaitable[bool]]
"""`http.py`'s guard: `await admit(scope, receive, send)` is False once it has sent a refusal."""
SessionCheck = Callable[[str, "TokenSettings | None"], "str | None"]
"""`http.session_visibility`: None when the token may use the session, else the not-found message."""
_TOKEN_KEY = "mcp_harness.token"  # `http.TOKEN_SCOPE_KEY`, not imported: http.py imports this module
UPLOAD_PATH = "/mcp/sessions/{session_id}/attachments"


class _ClientGone(Exception):
    """The uploader hung up before the body ended."""


class _Body(io.RawIOBase):
    """The request body as a blocking file for the store's worker thread: each read pulls ASGI messages from the
    event loop until it has what was asked for (so at most one chunk beyond the store's read is in memory)."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._buffer = bytearray()
        self._done = False

    def readable(self) -> bool:
        return True

    async def _pull(self) -> Message:
        return await self._receive()

    def read(self, size: int = -1, /) -> bytes:
        while not self._done and (size < 0 or len(self._buffer) < size):
            message = anyio.from_thread.run(self._pull)
            if message["type"] == "http.disconnect":
                raise _ClientGone
            self._buffer += message.get("body", b"")
            self._done = not message.get("more_body", False)
        cut = len(self._buffer) if size < 0 else size
        out = bytes(self._buffer[:cut])
        del self._buffer[:cut]
        return out


def attachment_routes(harness: Harness, admit: Admit, session_visible: SessionCheck) -> list[BaseRoute]:
    """The upload route, for `http_app` to mount beside `/mcp`."""

    class Upload:
        """A raw ASGI endpoint: the body is streamed, never read whole."""

        async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
            if not await admit(scope, receive, send):
                return
            if scope["method"] != "POST":
                await _answer(405, {"error": "Upload a file with POST (the body is the file)."})(scope, receive, send)
                return
            session_id: str = scope["path_params"]["session_id"]
            token: TokenSettings | None = scope.get(_TOKEN_KEY)
            refusal = await anyio.to_thread.run_sync(session_visible, session_id, token)
            if refusal is not None:
                await _answer(404, {"error": refusal})(scope, receive, send)
                return
            headers = Headers(scope=scope)
            try:
                record = await _store(harness, session_id, headers, receive)
            except _ClientGone:
                logger.info("upload to %s ended early: the client went away", session_id)
                return
            except HarnessError as exc:
                await _answer(exc.status, {"error": exc.message})(scope, receive, send)
                return
            await _answer(201, record)(scope, receive, send)

    return [Route(UPLOAD_PATH, endpoint=Upload())]


async def _store(harness: Harness, session_id: str, headers: Headers, receive: Receive) -> dict[str, Any]:
    length = headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_ATTACHMENT_BYTES:
        raise TooLarge(
            f"The attachment is {length} bytes, over the limit of {MAX_ATTACHMENT_BYTES} bytes (100 MiB) a file; "
            "nothing was stored."
        )
    name = unquote(headers.get("x-filename", ""))
    mime = headers.get("content-type")
    body = _Body(receive)
    record = await anyio.to_thread.run_sync(lambda: harness.attachments.add(session_id, name or None, mime, body))
    return record.to_json()


def _answer(status: int, payload: dict[str, Any]) -> JSONResponse:
    return JSONResponse(payload, status_code=status)


__all__ = ["UPLOAD_PATH", "attachment_routes"]
