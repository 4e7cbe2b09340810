"""Pictures and files in documents: `write hm://` uploads the Image, Video and File blocks that point at memory
files or attachments to IPFS and publishes them as `ipfs://` links, after the link check and only with the publish
grant; a dry run computes the links and stores nothing. The signed blobs are checked by the official Seed client."""

from __future__ import annotations

import io

import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.hypermedia.unixfs import import_bytes
from mcp_harness.identity.identities import Identity
from mcp_harness.server import build_server
from mcp_harness.store.ipfs_blocks import IpfsBlockStore
from tests.conftest import call, refused
from tests.hypermedia.unixfs_kit import K, file_bytes
from tests.js_oracle import verify_all_blobs
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"picture bytes" * 10


def _links(tree: list[dict[str, object]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree:
        block = node["block"]
        assert isinstance(block, dict)
        if block.get("link"):
            out[str(block["type"])] = str(block["link"])
        children = node.get("children")
        if isinstance(children, list):
            out.update(_links(children))  # pyright: ignore[reportUnknownArgumentType]
    return out


def _rows(harness: Harness) -> int:
    with harness.db.reading() as conn:
        return conn.execute("SELECT count(*) FROM ipfs_blocks").fetchone()[0]


async def test_memory_pictures_video_and_files_are_published_as_ipfs_blocks(
    client: Client, alice: Identity, harness: Harness
) -> None:
    memory = harness.memory(harness.agent())
    video = file_bytes(K + 10, "video")
    memory.write_file("pics/cat.png", PNG)
    memory.write_file("clips/walk.mp4", video)
    memory.write_file("docs/report.pdf", b"%PDF-1.4 report")
    content = (
        "# Trip\n\n![a cat](pics/cat.png)\n\n<file://clips/walk.mp4> <!-- id:v1 type:Video -->\n\n"
        "<file://~/memory/docs/report.pdf> <!-- id:f1 type:File -->\n\n![remote](https://example.org/a.png)\n"
    )
    url = f"hm://{alice.account_id}/trip"
    await call(client, "write", {"address": url, "content": content, "options": {"name": "Trip"}})
    links = _links((await call(client, "read", {"address": url, "format": "json"}))["content"])
    expected = {name: f"ipfs://{import_bytes(data)[0]}" for name, data in (("cat", PNG), ("walk", video))}
    assert links["Video"] == expected["walk"] and links["File"] == f"ipfs://{import_bytes(b'%PDF-1.4 report')[0]}"
    assert links["Image"] == "https://example.org/a.png"  # the last Image: a web link stays as it is
    markdown = (await call(client, "read", {"address": url}))["markdown"]
    assert f"![a cat]({expected['cat']})" in markdown
    store = IpfsBlockStore(harness.db)
    assert store.get(import_bytes(PNG)[0]) == PNG
    # Writing the same text again changes nothing: the links resolve to the same CIDs.
    again = await call(client, "write", {"address": url, "content": content, "options": {"action": "update"}})
    assert "already says exactly that" in again["summary"]
    assert {"Change", "Ref"} <= verify_all_blobs(harness)


async def test_a_published_memory_file_resolves_its_pictures_from_its_own_folder(
    client: Client, alice: Identity, harness: Harness
) -> None:
    memory = harness.memory(harness.agent())
    memory.write_file("notes/cat.png", PNG)
    memory.write_file("notes/post.md", b"---\nname: Post\n---\n\n![](cat.png)\n")
    url = f"hm://{alice.account_id}/post"
    await call(client, "write", {"address": url, "options": {"fromPath": "notes/post.md"}})
    markdown = (await call(client, "read", {"address": url}))["markdown"]
    assert f"(ipfs://{import_bytes(PNG)[0]})" in markdown


async def test_an_attachment_picture_is_published_from_the_conversation(harness: Harness, alice: Identity) -> None:
    session = harness.sessions.create(harness.account_id, harness.agent().id).id
    ident = harness.attachments.add(session, "shot.png", "image/png", io.BytesIO(PNG)).id
    url = f"hm://{alice.account_id}/shot"
    async with Client(build_server(harness, session_id=session)) as c:
        await call(c, "write", {"address": url, "content": f"![shot](attachment:{ident})", "options": {"name": "S"}})
        markdown = (await call(c, "read", {"address": url}))["markdown"]
    assert f"![shot](ipfs://{import_bytes(PNG)[0]})" in markdown


async def test_a_dry_run_uploads_nothing_and_a_bad_link_signs_nothing(
    client: Client, alice: Identity, harness: Harness
) -> None:
    harness.memory(harness.agent()).write_file("cat.png", PNG)
    url = f"hm://{alice.account_id}/dry"
    dry = await call(
        client, "write", {"address": url, "content": "![](cat.png)", "options": {"name": "D"}, "dryRun": True}
    )
    assert dry["dryRun"] is True and _rows(harness) == 0
    cases = [
        ("![](missing.png)", "Image block", "missing.png"),
        ("![](file:///etc/passwd)", "file on the server's disk", "file:///etc/passwd"),
        ("![](attachment:" + "a" * 64 + ")", "No attachment", "a" * 64),
        # The link check comes first: a dangling hm:// link refuses the write before any picture is uploaded.
        (f"[x](hm://{alice.account_id}/nothing)\n\n![](cat.png)", "names nothing published", "nothing"),
    ]
    for content, words, named in cases:
        error = await refused(client, "write", {"address": url, "content": content, "options": {"name": "D"}})
        assert error["status"] in (400, 404) and words in error["message"] and named in error["message"], error
    assert _rows(harness) == 0
    error = await refused(client, "read", {"address": url})
    assert error["status"] == 404


async def test_without_the_publish_grant_no_picture_is_uploaded(
    client: Client, alice: Identity, harness: Harness
) -> None:
    harness.memory(harness.agent()).write_file("cat.png", PNG)
    grant(harness, alice, tools=["execute"])
    url = f"hm://{alice.account_id}/nope"
    error = await refused(client, "write", {"address": url, "content": "![](cat.png)", "options": {"name": "N"}})
    assert error["status"] == 403 and _rows(harness) == 0
