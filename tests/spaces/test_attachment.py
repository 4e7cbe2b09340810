"""`read attachment:<id>`, `write ~/memory/… {fromAttachment}` and images from memory, through the SDK client: an
image arrives as MCP image content, text inline, anything else as metadata with the way to work on it."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from mcp_harness.addresses import parse_address
from mcp_harness.binding import SessionBinding
from mcp_harness.harness import Harness
from mcp_harness.models.vision import MAX_IMAGE_BYTES
from mcp_harness.server import build_server
from mcp_harness.spaces.attachment import read_attachment
from tests.conftest import call, refused
from tests.store.test_attachments import tiny_png

pytestmark = pytest.mark.anyio


@pytest.fixture
def session(harness: Harness) -> str:
    return harness.sessions.create(harness.account_id, harness.agent().id).id


@pytest.fixture(params=["legacy", "2026-07-28"])
async def bound(request: pytest.FixtureRequest, harness: Harness, session: str) -> AsyncIterator[Client]:
    """A client bound to `session`, once per protocol era."""
    async with Client(build_server(harness, session_id=session), mode=request.param) as c:
        yield c


def attach(harness: Harness, session: str, name: str, data: bytes, mime: str | None = None) -> str:
    return harness.attachments.add(session, name, mime, io.BytesIO(data)).id


def images_of(result: Any) -> list[types.ImageContent]:
    return [block for block in result.content if isinstance(block, types.ImageContent)]


async def test_an_image_attachment_arrives_as_image_content(bound: Client, harness: Harness, session: str) -> None:
    png = tiny_png(4, 3)
    ident = attach(harness, session, "photo.png", png)
    result = await bound.call_tool("read", {"address": f"attachment:{ident}"})
    assert not result.is_error
    assert result.structured_content == {
        "summary": f'Attachment "photo.png" (image/png, {len(png)} bytes) is shown as an image.',
        "id": ident,
        "name": "photo.png",
        "mimeType": "image/png",
        "size": len(png),
        "shownAsImage": True,
    }
    [image] = images_of(result)
    assert image.mime_type == "image/png" and base64.b64decode(image.data) == png
    # The log keeps what was shown, never the bytes.
    logged = [e.payload for e in harness.sessions.events(session) if e.type == "tool_result"]
    assert logged[-1]["output"]["shownAsImage"] is True and "data" not in str(logged[-1]["output"])


async def test_text_is_inline_and_other_types_are_metadata_with_a_hint(
    bound: Client, harness: Harness, session: str
) -> None:
    notes = attach(harness, session, "notes.md", b"# Notes\nbuy milk\n", "text/markdown")
    text = await call(bound, "read", {"address": f"attachment:{notes}"})
    assert text["content"] == "# Notes\nbuy milk\n" and text["shownAsImage"] is False
    big = attach(harness, session, "big.txt", b"a" * (256 * 1024 + 1))
    over = await call(bound, "read", {"address": f"attachment:{big}"})
    assert "content" not in over and over["reason"] == "text over 256 KiB is not shown inline."
    pdf = attach(harness, session, "paper.pdf", b"%PDF-1.7 binary")
    meta = await call(bound, "read", {"address": f"attachment:{pdf}"})
    assert meta["mimeType"] == "application/pdf" and meta["shownAsImage"] is False
    assert f'write ~/memory/<path> {{fromAttachment: "{pdf}"}}' in meta["summary"]
    fake = attach(harness, session, "fake.png", b"not really a png", "image/png")
    bogus = await call(bound, "read", {"address": f"attachment:{fake}"})
    assert bogus["shownAsImage"] is False and "not a PNG, JPEG, GIF or WebP" in bogus["reason"]


async def test_unknown_malformed_and_other_conversations_attachments_are_refused(
    bound: Client, harness: Harness
) -> None:
    elsewhere = harness.sessions.create(harness.account_id, harness.agent().id).id
    theirs = attach(harness, elsewhere, "secret.txt", b"not yours")
    missing = await refused(bound, "read", {"address": f"attachment:{theirs}"})
    unknown = await refused(bound, "read", {"address": "attachment:" + "0" * 64})
    assert missing["status"] == unknown["status"] == 404
    assert missing["message"] == unknown["message"].replace("0" * 64, theirs)  # word for word, but the id
    malformed = await refused(bound, "read", {"address": "attachment:XYZ"})
    assert malformed["status"] == 400 and "64 lowercase hex characters" in malformed["message"]
    options = await refused(bound, "read", {"address": f"attachment:{theirs}", "options": {"raw": True}})
    assert 'does not understand option "raw"' in options["message"]


async def test_a_child_conversation_reads_what_its_parent_was_given(harness: Harness, session: str) -> None:
    ident = attach(harness, session, "brief.txt", b"from the parent")
    child = harness.sessions.create(harness.account_id, harness.agent().id, kind="child", parent_session_id=session)
    async with Client(build_server(harness, session_id=child.id)) as c:
        data = await call(c, "read", {"address": f"attachment:{ident}"})
    assert data["content"] == "from the parent"


async def test_from_attachment_saves_into_memory_and_a_memory_image_is_image_content(
    bound: Client, harness: Harness, session: str
) -> None:
    png = tiny_png(5, 5)
    ident = attach(harness, session, "photo.png", png)
    saved = await call(bound, "write", {"address": "~/memory/", "options": {"fromAttachment": ident}})
    assert saved == {
        "summary": f'Saved attachment "photo.png" to attachments/photo.png ({len(png)} bytes, image/png).',
        "id": ident,
        "path": "attachments/photo.png",
        "size": len(png),
        "mimeType": "image/png",
    }
    named = await call(bound, "write", {"address": "~/memory/pics/red.png", "options": {"fromAttachment": ident}})
    into = await call(bound, "write", {"address": "~/memory/inbox/", "options": {"fromAttachment": ident}})
    assert (named["path"], into["path"]) == ("pics/red.png", "inbox/photo.png")
    assert (harness.agent().memory_dir / "pics" / "red.png").read_bytes() == png
    result = await bound.call_tool("read", {"address": "~/memory/attachments/photo.png"})
    assert result.structured_content is not None and result.structured_content["shownAsImage"] is True
    [image] = images_of(result)
    assert base64.b64decode(image.data) == png
    both = await refused(
        bound, "write", {"address": "~/memory/x", "content": "c", "options": {"fromAttachment": ident}}
    )
    assert both["message"] == "write ~/memory with fromAttachment takes no content and no other option."


async def test_a_memory_image_over_the_bound_is_metadata_only(bound: Client, harness: Harness) -> None:
    big = tiny_png() + b"\x00" * (MAX_IMAGE_BYTES - len(tiny_png()) + 1)
    (harness.agent().memory_dir / "huge.png").write_bytes(big)
    result = await bound.call_tool("read", {"address": "~/memory/huge.png"})
    assert images_of(result) == []
    assert result.structured_content is not None and result.structured_content["encoding"] == "binary"
    assert "shownAsImage" not in result.structured_content


async def test_a_server_run_call_says_what_was_shown_without_carrying_the_bytes(harness: Harness, session: str) -> None:
    """The run's next model request loads the image from the log (runs/images.py); the result carries none."""
    import dataclasses

    ident = attach(harness, session, "photo.png", tiny_png())
    ctx = SessionBinding(harness, agent_id=harness.agent().id, session_id=session).context_sync()
    address = parse_address(f"attachment:{ident}")
    assert address is not None
    result = read_attachment(dataclasses.replace(ctx, run_id="a-run"), address, {}, "markdown")
    assert result.data["shownAsImage"] is True and result.images == ()  # scripted takes anything
