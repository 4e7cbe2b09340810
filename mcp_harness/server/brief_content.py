"""A `delegate` brief given as MCP content blocks: files in it become attachments the child sees (issue 18).

MCP has no channel for content in tool *arguments*: `tools/call` carries plain JSON checked against the tool's input
schema, and the delegate schema types `brief` as a string, so a client whose model writes the call sends text
(and an image the user dropped into that client's chat stays with the client). A client that builds the call in
code may still send the brief as an array of content blocks — the shapes MCP uses everywhere else — and this edge
takes it: text blocks become the brief's text; an image, audio or embedded resource is stored as an attachment of
the calling conversation and named in the brief as `attachment:<id>` (which the child reads, and whose image a
vision model receives with the brief: `runs/images.py`); a resource link is named by its URI.
"""

from __future__ import annotations

import base64
import binascii
import io
import mimetypes
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from mcp_harness.errors import BadRequest

if TYPE_CHECKING:
    from mcp_harness.binding import SessionBinding

_BLOCKS: TypeAdapter[list[types.ContentBlock]] = TypeAdapter(list[types.ContentBlock])
ACCEPTED = "text, image, audio, resource (embedded) and resource_link content blocks"


async def lift_brief(binding: SessionBinding, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` with a content-block `brief` turned into text naming the attachments it stored.

    Raises:
        BadRequest: the array holds something that is not a content block, or a block whose data is not base64.
    """
    try:
        blocks = _BLOCKS.validate_python(arguments["brief"])
    except ValidationError as exc:
        raise BadRequest(
            f"delegate brief must be a string or an array of MCP content blocks ({ACCEPTED}); "
            f"{exc.error_count()} block(s) are not: {exc.errors()[0]['msg']}."
        ) from None
    return {**arguments, "brief": await anyio.to_thread.run_sync(_lift, binding, blocks)}


def _lift(binding: SessionBinding, blocks: list[types.ContentBlock]) -> str:
    texts: list[str] = []
    attached: list[str] = []
    for n, block in enumerate(blocks, 1):
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ResourceLink):
            attached.append(f"- {block.uri}" + (f" ({block.name})" if block.name else ""))
        elif isinstance(block, types.ImageContent | types.AudioContent):
            ext = mimetypes.guess_extension(block.mime_type) or ""
            attached.append(_store(binding, f"{block.type}-{n}{ext}", block.mime_type, _decoded(block.data, n)))
        else:
            resource = block.resource
            name = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or f"resource-{n}"
            if isinstance(resource, types.TextResourceContents):
                data = resource.text.encode("utf-8")
            else:
                data = _decoded(resource.blob, n)
            attached.append(_store(binding, name, resource.mime_type, data) + f" ({resource.uri})")
    text = "\n\n".join(t for t in texts if t)
    if attached:
        text += ("\n\n" if text else "") + "Attached:\n" + "\n".join(attached)
    return text


def _store(binding: SessionBinding, name: str, mime: str | None, data: bytes) -> str:
    record = binding.harness.attachments.add(binding.ensure_sync().id, name, mime, io.BytesIO(data))
    return f"- attachment:{record.id} ({record.name}, {record.mime_type}, {record.size} bytes)"


def _decoded(data: str, n: int) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"delegate brief block {n}: its data is not base64.") from None


__all__ = ["ACCEPTED", "lift_brief"]
