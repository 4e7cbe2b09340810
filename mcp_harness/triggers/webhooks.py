"""Webhook triggers, the domain side (HARNESS §10 sources, issue 16 point 6): a secret per trigger, GitHub's
signature convention, the delivery's dedupe key, and the firing. `server/hooks.py` is the HTTP route.

A `{type: "webhook"}` trigger gets a random secret when it is created, sealed like every secret (`SecretStore`, one
row `webhook:<trigger id>` of kind `webhook-secret`); the write that creates it is the one place the secret is shown.
A delivery must carry `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body under the secret>`, compared in
constant time. Its id — `X-GitHub-Delivery`, else `X-Webhook-Delivery`, else `Idempotency-Key`, else the body's
SHA-256 — is the firing's dedupe key, so a replay fires once. (The signature covers the body only, as GitHub's does:
someone who captured a delivery could resend it under a new id header; without one, a resent body is a replay.)

The body is the activity — JSON when it parses, else text — and reaches the model only inside `<trigger_context>`,
as data (`fire.py`); a header's text reaches it only if it is a plain token.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcp_harness.errors import NotFound
from mcp_harness.jsondepth import MAX_INPUT_DEPTH, depth_exceeds
from mcp_harness.triggers.fire import FireHost, fire

if TYPE_CHECKING:
    from mcp_harness.store.secrets import SecretStore
    from mcp_harness.store.triggers import FiringRecord, TriggerRecord

SECRET_KIND = "webhook-secret"
MAX_BODY_BYTES = 256 * 1024
SIGNATURE_HEADER = "x-hub-signature-256"
DELIVERY_HEADERS = ("x-github-delivery", "x-webhook-delivery", "idempotency-key")
EVENT_HEADERS = ("x-github-event", "x-webhook-event")
_TOKEN = re.compile(r"[A-Za-z0-9._:-]{1,200}")
"""What a delivery id or an event name from a header may be (headers are not signed: nothing else gets through)."""

Outcome = Literal["fired", "duplicate", "not-found", "unsigned", "bad-signature", "bad-delivery-id"]


class WebhookHost(FireHost, Protocol):
    @property
    def secrets(self) -> SecretStore: ...


@dataclass(frozen=True, slots=True)
class Received:
    """What became of a delivery."""

    outcome: Outcome
    message: str
    firing: FiringRecord | None = None


def secret_name(trigger_id: str) -> str:
    return f"webhook:{trigger_id}"


def hook_path(trigger_id: str) -> str:
    return f"/hooks/{trigger_id}"


def issue_secret(store: SecretStore, trigger: TriggerRecord) -> str:
    """A fresh secret for the trigger, sealed; returned once, for the write's result. Blocking."""
    token = secrets.token_hex(32)
    store.set(
        trigger.account_id,
        secret_name(trigger.id),
        token.encode(),
        kind=SECRET_KIND,
        metadata={"triggerId": trigger.id},
    )
    return token


def drop_secret(store: SecretStore, account_id: str, trigger_id: str) -> None:
    store.delete(account_id, secret_name(trigger_id))


def signature(secret: bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` value of `body`: `sha256=<hex HMAC-SHA256>`."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def signed(secret: bytes, body: bytes, header: str) -> bool:
    """Whether `header` is the body's signature under `secret`, compared in constant time."""
    presented = header.strip().lower().encode("utf-8", errors="replace")
    return hmac.compare_digest(signature(secret, body).encode(), presented)


def webhook_trigger(host: FireHost, trigger_id: str) -> TriggerRecord | None:
    """The enabled webhook trigger of that id; None for any other id (unknown, disabled, another source alike)."""
    trigger = host.triggers.get(trigger_id)
    if trigger is None or not trigger.enabled or trigger.source_type != "webhook":
        return None
    return trigger


def delivery_id(headers: Mapping[str, str], body: bytes) -> str | None:
    """The delivery's id from its headers, else `sha256:<hex of the body>`; None when a header holds something
    that is not a plain token."""
    for name in DELIVERY_HEADERS:
        value = headers.get(name)
        if value is not None:
            value = value.strip()
            return value if _TOKEN.fullmatch(value) else None
    return "sha256:" + hashlib.sha256(body).hexdigest()


def body_value(body: bytes) -> Any:
    """JSON when the body parses as (not too deeply nested) JSON, else its text."""
    text = body.decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return text if depth_exceeds(value, MAX_INPUT_DEPTH) else value


def activity(headers: Mapping[str, str], body: bytes, delivery: str) -> tuple[dict[str, Any], str]:
    """The firing's activity and its one-line summary."""
    event = next((v.strip() for n in EVENT_HEADERS if (v := headers.get(n)) is not None), None)
    event = event if event is not None and _TOKEN.fullmatch(event) else None
    data: dict[str, Any] = {"type": "webhook", "deliveryId": delivery}
    if event is not None:
        data["event"] = event
    data["body"] = body_value(body)
    shown = delivery[: len("sha256:") + 12] if delivery.startswith("sha256:") else delivery
    summary = f"webhook {event} delivery {shown}" if event else f"webhook delivery {shown}"
    return data, summary


def receive(host: WebhookHost, trigger_id: str, headers: Mapping[str, str], body: bytes) -> Received:
    """Check and fire one delivery. `headers` have lowercase names. Blocking; the caller wakes the engine when
    it fired."""
    trigger = webhook_trigger(host, trigger_id)
    if trigger is None:
        return Received("not-found", "No such webhook.")
    header = headers.get(SIGNATURE_HEADER)
    if not header:
        return Received("unsigned", f"Sign the body: {SIGNATURE_HEADER}: sha256=<hex HMAC-SHA256 of the raw body>.")
    try:
        secret = host.secrets.get_value(trigger.account_id, secret_name(trigger.id))
    except NotFound:  # a trigger without its secret cannot be called; it reads like one that does not exist
        return Received("not-found", "No such webhook.")
    if not signed(secret, body, header):
        return Received("bad-signature", f"The {SIGNATURE_HEADER} signature does not match the body.")
    delivery = delivery_id(headers, body)
    if delivery is None:
        names = ", ".join(DELIVERY_HEADERS)
        return Received("bad-delivery-id", f"A delivery id ({names}) must be 1-200 of A-Z a-z 0-9 . _ : -.")
    data, summary = activity(headers, body, delivery)
    record = fire(host, trigger=trigger, dedupe_key=f"webhook:{delivery}", activity=data, summary=summary)
    if record is None:
        return Received("duplicate", f"Delivery {delivery} was received before; it fired once.")
    return Received("fired", f"Delivery {delivery} fired.", record)


__all__ = [
    "MAX_BODY_BYTES",
    "SECRET_KIND",
    "Received",
    "WebhookHost",
    "activity",
    "delivery_id",
    "drop_secret",
    "hook_path",
    "issue_secret",
    "receive",
    "signature",
    "signed",
    "webhook_trigger",
]
