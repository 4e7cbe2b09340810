"""`POST /mcp/sessions/{id}/attachments` over real HTTP (uvicorn on loopback): a raw body streamed to disk and read
back over MCP as image content, the session rule of `scope.py` (another agent's session reads as unknown), and the
100 MiB limit enforced while the body streams — a 101 MiB upload never puts 101 MiB on disk."""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from mcp_harness.server.transports import session_visibility
from mcp_harness.store.attachments import MAX_ATTACHMENT_BYTES
from tests.conftest import owner_and_other, serving
from tests.store.test_attachments import tiny_png

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


@dataclass
class Served:
    base: str
    harness: Harness
    mine: str
    """A session of the default agent."""
    theirs: str
    """A session of agent "other" (the `other-token` is scoped to it)."""

    def url(self, session: str) -> str:
        return f"{self.base}/mcp/sessions/{session}/attachments"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    harness = Harness(load_settings(data_dir=tmp_path / "data"))
    http = owner_and_other(harness)
    mine = harness.sessions.create(harness.account_id, harness.agent().id).id
    theirs = harness.sessions.create(harness.account_id, harness.agent("other").id).id
    app = http_app(
        build_server(harness),
        host="127.0.0.1",
        http=http,
        session_visible=session_visibility(harness),
        attachments=harness,
    )
    async with serving(app) as base:
        yield Served(base, harness, mine, theirs)
    harness.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


async def test_an_upload_streams_to_disk_and_reads_back_over_mcp_as_an_image(served: Served) -> None:
    png = tiny_png(6, 6)
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(
            served.url(served.mine),
            content=png,
            headers={**bearer("owner-token"), "Content-Type": "image/png", "X-Filename": "r%C3%A9d.png"},
        )
    assert response.status_code == 201, response.text
    record = response.json()
    assert record["id"] == hashlib.sha256(png).hexdigest() and record["name"] == "réd.png"
    assert (record["mimeType"], record["size"], record["sessionId"]) == ("image/png", len(png), served.mine)
    transport = streamable_http_client(
        f"{served.base}/mcp/sessions/{served.mine}", http_client=httpx2.AsyncClient(headers=bearer("owner-token"))
    )
    with anyio.fail_after(30):
        async with Client(transport, mode="legacy") as c:  # pyright: ignore[reportArgumentType]
            result = await c.call_tool("read", {"address": record["address"]})
    [image] = [b for b in result.content if isinstance(b, types.ImageContent)]
    assert base64.b64decode(image.data) == png and image.mime_type == "image/png"


async def test_over_http_an_image_too_big_for_one_mcp_message_becomes_a_note(served: Served) -> None:
    """The SDK's HTTP client drops server-sent events over 1 MiB; a 720 KiB image would be one of 960 KiB."""
    big = tiny_png() + b"\x00" * (720 * 1024)
    ident = served.harness.attachments.add(served.mine, "big.png", None, io.BytesIO(big)).id
    transport = streamable_http_client(
        f"{served.base}/mcp/sessions/{served.mine}", http_client=httpx2.AsyncClient(headers=bearer("owner-token"))
    )
    with anyio.fail_after(30):
        async with Client(transport, mode="legacy") as c:  # pyright: ignore[reportArgumentType]
            result = await c.call_tool("read", {"address": f"attachment:{ident}"})
    assert not any(isinstance(b, types.ImageContent) for b in result.content)
    note = result.content[-1]
    assert isinstance(note, types.TextContent) and "is not sent over HTTP" in note.text


async def test_a_token_may_upload_only_to_sessions_it_may_see(served: Served) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        foreign = await http.post(served.url(served.mine), content=b"x", headers=bearer("other-token"))
        unknown = await http.post(served.url("no-such-session"), content=b"x", headers=bearer("other-token"))
        anonymous = await http.post(served.url(served.theirs), content=b"x")
        own = await http.post(served.url(served.theirs), content=b"theirs", headers=bearer("other-token"))
        wrong_method = await http.get(served.url(served.theirs), headers=bearer("other-token"))
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json()["error"] == unknown.json()["error"].replace("no-such-session", served.mine)
    assert anonymous.status_code == 401 and wrong_method.status_code == 405
    assert own.status_code == 201 and own.json()["sessionId"] == served.theirs
    assert served.harness.attachments.list(served.mine) == []


async def test_a_declared_length_over_100_mib_is_refused_before_any_byte_is_read(served: Served) -> None:
    port = int(served.base.rsplit(":", 1)[1])
    request = (
        f"POST /mcp/sessions/{served.mine}/attachments HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer owner-token\r\nContent-Length: {MAX_ATTACHMENT_BYTES + MIB}\r\n\r\n"
    )
    with anyio.fail_after(30):
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(request.encode())  # headers only: the body is never sent
            reply = b""
            while b"\r\n\r\n" not in reply:
                reply += await stream.receive()
    assert reply.startswith(b"HTTP/1.1 413")
    assert disk_bytes(served.harness.attachments.root) == 0


async def test_a_101_mib_chunked_upload_is_refused_while_streaming_and_never_reaches_101_mib_on_disk(
    served: Served,
) -> None:
    root = served.harness.attachments.root
    chunk = b"\x07" * MIB  # one MiB sent 101 times: the test never holds the upload in memory
    peak = 0

    def body() -> Iterator[bytes]:
        nonlocal peak
        for _ in range(101):
            peak = max(peak, disk_bytes(root))
            yield chunk

    async def stream() -> AsyncIterator[bytes]:
        for part in body():
            yield part
            await anyio.sleep(0)  # let the server (same event loop) take it in as it arrives

    status: int | None = None
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(timeout=60) as http:
            try:
                response = await http.post(served.url(served.mine), content=stream(), headers=bearer("owner-token"))
                status = response.status_code
            except httpx2.TransportError:
                status = None  # the server answered and closed while the rest of the body was still on its way
    if status is not None:
        assert status == 413
    assert 0 < peak <= MAX_ATTACHMENT_BYTES  # written as it arrived, and never more than the limit
    assert disk_bytes(root) == 0  # and nothing kept once refused
    assert served.harness.attachments.list(served.mine) == []
