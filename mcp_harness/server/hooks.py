"""`POST /hooks/<trigger id>`: webhook deliveries over HTTP (issue 16 point 6; the domain is `triggers/webhooks.py`).

Mounted by `http_app` behind its Host check but not its bearer token: the HMAC signature is the delivery's
authentication. In order: an unknown, disabled or non-webhook trigger id is 404 (one answer for all of them, before
the body is read); a body over 256 KiB is 413 (by `Content-Length`, or counted as it streams); no signature or a
wrong one is 401; then the delivery fires (202 `fired`) or was already received (200 `duplicate`). Nothing of the
body or the secret is logged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from mcp_harness.errors import TooLarge
from mcp_harness.server.bodies import read_body
from mcp_harness.triggers import webhooks
from mcp_harness.triggers.webhooks import MAX_BODY_BYTES, Received

if TYPE_CHECKING:
    from mcp_harness.harness import Harness

logger = logging.getLogger(__name__)

STATUS = {"fired": 202, "duplicate": 200, "not-found": 404, "unsigned": 401, "bad-signature": 401}
NOT_FOUND = Received("not-found", "No such webhook.")


def _answer(received: Received) -> JSONResponse:
    body: dict[str, str] = {"status": received.outcome, "message": received.message}
    if received.firing is not None:
        body["firingId"] = received.firing.id
    return JSONResponse(body, status_code=STATUS.get(received.outcome, 400))


class Hooks:
    """The ASGI endpoint of `/hooks/{trigger_id}` (a class, so Starlette routes every method to it)."""

    def __init__(self, harness: Harness, *, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.harness = harness
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            message = {"status": "method-not-allowed", "message": "POST a signed delivery here."}
            await JSONResponse(message, status_code=405, headers={"Allow": "POST"})(scope, receive, send)
            return
        trigger_id = str(scope.get("path_params", {}).get("trigger_id", ""))
        known = await anyio.to_thread.run_sync(webhooks.webhook_trigger, self.harness, trigger_id)
        if known is None:
            await _answer(NOT_FOUND)(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        try:
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                raise TooLarge("declared")
            body = await read_body(receive, self.max_body_bytes, "over the limit")
        except TooLarge:
            limit = f"at most {self.max_body_bytes // 1024} KiB"
            response = JSONResponse({"status": "too-large", "message": f"The body is too large: {limit}."}, 413)
            await response(scope, receive, send)
            return
        lowered = {name.lower(): value for name, value in headers.items()}
        received = await anyio.to_thread.run_sync(webhooks.receive, self.harness, trigger_id, lowered, body)
        logger.info("Webhook delivery for trigger %s: %s", trigger_id, received.outcome)
        if received.outcome == "fired":
            self.harness.engine.wake()
        await _answer(received)(scope, receive, send)


__all__ = ["Hooks"]
