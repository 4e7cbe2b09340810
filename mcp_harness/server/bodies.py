"""Reading an HTTP request body under a cap, for the routes beside `/mcp` (webhooks, PublishBlobs): the cap holds
while the body streams in, so a sender that lies in (or omits) Content-Length is cut off at the byte past it."""

from __future__ import annotations

from starlette.types import Receive

from mcp_harness.errors import TooLarge


async def read_body(receive: Receive, limit: int, refusal: str) -> bytes:
    """The whole body, at most `limit` bytes.

    Raises:
        TooLarge: with `refusal` as its message, once more than `limit` bytes have arrived.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge(refusal)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
