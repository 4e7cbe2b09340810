"""Images in a server-run conversation reach its model (issue 18, HARNESS §11.2).

The log keeps no image bytes: a tool result says what it showed (`shownAsImage: true` with an attachment `id`, or
a memory `path`), and a user message names attachments as `attachment:<id>` in its text (a delegate brief) or in an
`attachments` list. Each time a run's request is built from the log, `with_images` puts the images themselves on
the messages (`Message.images`), which the wire formats send as image parts: OpenAI-format `image_url` parts with a
data URL, Anthropic `image` blocks with a base64 source (`models/vision.py`). A model the catalog says takes no
images gets, in place of each, a text note naming what was not shown — never a silent drop.

Only the `MAX_IMAGES_PER_REQUEST` most recent images travel with a request; earlier ones get a note saying how to
see them again, so a long conversation about pictures does not resend every picture on every turn.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcp_harness.errors import HarnessError
from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.models.vision import shown_as_image
from mcp_harness.models.wire import ImagePart, Message
from mcp_harness.scope import Scope
from mcp_harness.spaces.attachment import find_attachment, image_type, model_takes_images
from mcp_harness.store.attachments import sniff_mime

if TYPE_CHECKING:
    from mcp_harness.services import Services as ImageHost
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.runs import RunRecord
    from mcp_harness.store.sessions import EventRecord


MAX_IMAGES_PER_REQUEST = 8
_MENTION = re.compile(r"attachment:([0-9a-f]{64})")

Ref = tuple[str, str]
"""`("attachment", id)` or `("memory", path)`."""


def with_images(
    services: ImageHost, agent: AgentRecord, run: RunRecord, events: Sequence[EventRecord], messages: list[Message]
) -> list[Message]:
    """`messages` (replayed from `events`) with the images their events showed or named attached, or noted."""
    by_call, by_text = _refs(events)
    if not by_call and not by_text:
        return messages
    plan: list[tuple[int, list[Ref]]] = []
    pending = list(by_text)
    for i, m in enumerate(messages):
        if m.role == "tool" and m.tool_call_id in by_call:
            plan.append((i, by_call[m.tool_call_id or ""]))
        elif m.role == "user" and pending and m.content == pending[0][0]:
            plan.append((i, pending.pop(0)[1]))
    accepts, why = model_takes_images(services, agent)
    scope = Scope.of_run(run)
    budget = MAX_IMAGES_PER_REQUEST
    out = list(messages)
    for i, refs in reversed(plan):  # newest first, so the budget keeps the latest images
        images: list[ImagePart] = []
        notes: list[str] = []
        for ref in refs:
            found = _load(services, agent, scope, run.session_id, ref)
            if found is None:
                continue
            if isinstance(found, str):
                notes.append(found)
            elif not accepts:
                notes.append(
                    f"[{found.label} is an image ({found.mime_type}, {len(found.data)} bytes) not shown: {why}]"
                )
            elif budget <= 0:
                notes.append(
                    f"[{found.label} was shown here; only the {MAX_IMAGES_PER_REQUEST} most recent images travel with "
                    "each request: read it again to see it.]"
                )
            else:
                budget -= 1
                images.append(found)
        if images or notes:
            m = out[i]
            content = "\n\n".join([m.content, *notes]) if notes else m.content
            out[i] = dataclasses.replace(m, content=content, images=(*m.images, *reversed(images)))
    return out


def _refs(events: Sequence[EventRecord]) -> tuple[dict[str, list[Ref]], list[tuple[str, list[Ref]]]]:
    """Tool results that showed an image (by call id), and user messages naming attachments (text, refs), in order."""
    by_call: dict[str, list[Ref]] = {}
    by_text: list[tuple[str, list[Ref]]] = []
    for event in events:
        p = event.payload
        if event.type == "tool_result" and event.actor != "user":
            out = p.get("output")
            if isinstance(out, dict) and out.get("shownAsImage") is True:  # pyright: ignore[reportUnknownMemberType]
                ref = _shown(out)  # pyright: ignore[reportUnknownArgumentType]
                if ref is not None:
                    by_call[str(p.get("toolCallId", ""))] = [ref]
        elif event.type == "message" and p.get("role") == "user":
            content = str(p.get("content", ""))
            ids = _MENTION.findall(content) + _listed(p.get("attachments"))
            if ids:
                by_text.append((content, [("attachment", i) for i in dict.fromkeys(ids)]))
    return by_call, by_text


def _shown(output: dict[str, Any]) -> Ref | None:
    if isinstance(output.get("path"), str):
        return ("memory", output["path"])
    if isinstance(output.get("id"), str):
        return ("attachment", output["id"])
    return None


def _listed(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    ids: list[str] = []
    for item in value:  # pyright: ignore[reportUnknownVariableType]
        ident = item.get("id") if isinstance(item, dict) else item  # pyright: ignore[reportUnknownMemberType]
        if isinstance(ident, str) and _MENTION.fullmatch(f"attachment:{ident}"):
            ids.append(ident)
    return ids


def _load(
    services: ImageHost, agent: AgentRecord, scope: Scope, session_id: str | None, ref: Ref
) -> ImagePart | str | None:
    """The image a ref names; a note when it is gone; None when it names no image (a text attachment in a brief:
    the model reads it itself)."""
    kind, key = ref
    if kind == "attachment":
        try:
            record = find_attachment(services, scope, session_id, key)
        except HarnessError:
            return None  # a mention of an id this conversation does not hold: reading it says so
        mime = image_type(services.attachments, record)
        if mime is None:
            return None
        data = services.attachments.read_bytes(record)
        return ImagePart(mime, data, label=f"attachment {record.name} (attachment:{record.id})")
    try:
        file = services.memory(agent).read_file(normalize_memory_path(key))
    except HarnessError:
        return f"[~/memory/{key} was shown as an image here, but it is no longer there.]"
    mime = sniff_mime(file.data[:16])
    if mime is None or not shown_as_image(mime, len(file.data)):
        return f"[~/memory/{key} was shown as an image here, but it is no longer an image that can be shown.]"
    return ImagePart(mime, file.data, label=f"~/memory/{key}")


__all__ = ["MAX_IMAGES_PER_REQUEST", "with_images"]
