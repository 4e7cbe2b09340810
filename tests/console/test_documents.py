"""The console's Documents pages over HTTP: accounts on the embedded node, a document as markdown with its versions
and comments, paging, the same token guard as every page, and other people's words shown inert."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import httpx2
import pytest

from mcp_harness.console.document_html import block_html, inline
from mcp_harness.hypermedia.blocks import Annotation, Block, BlockNode
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
from mcp_harness.hypermedia.node import comment_body
from mcp_harness.identity.keys import KeyPair
from tests.console.conftest import World, console_app

pytestmark = pytest.mark.anyio
OWNER = {"Authorization": "Bearer owner-token"}
OTHER = {"Authorization": "Bearer other-token"}
HOSTILE = '# Notes <script>alert("doc")</script>\n\nA <img src=x onerror="alert(1)"> line and **bold** words.\n'


def _client(world: World) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=console_app(world)), base_url="http://127.0.0.1")


def _ops(markdown: str, name: str) -> list[dict[str, Any]]:
    return metadata_operations({"name": name}) + document_operations(parse_markdown(markdown).tree)


def _publish(world: World) -> tuple[KeyPair, str]:
    """An account with a home document (two versions, one comment with a script in it) and three below it."""
    node = world.harness.hypermedia
    key = KeyPair.generate()
    account = key.account_id
    node.publish(node.create(key, account, "", _ops("First draft.\n", "Home <b>")))
    node.publish(node.update(key, node.document(account, ""), _ops(HOSTILE, "Home <b>")))
    comment = parse_markdown('Nice <script>alert("comment")</script> *work*.').tree
    node.publish([node.comment_blob(key, node.document(account, ""), comment_body(comment))])
    for i in range(3):
        node.publish(node.create(key, account, f"/child-{i}", _ops(f"Child {i}.\n", f"Child {i}")))
    return key, account


def _params(page: str) -> dict[str, str]:
    """`/api/view`'s query for a page URL, as the console's script sends it: its path as `page`, its query beside."""
    path, _, query = page.partition("?")
    return {"page": path, **dict(parse_qsl(query))}


async def _html(c: httpx2.AsyncClient, page: str, headers: dict[str, str] = OWNER) -> str:
    response = await c.get("/api/view", params=_params(page), headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["html"]


async def test_accounts_documents_versions_and_comments_render_with_every_value_inert(world: World) -> None:
    _, account = _publish(world)
    async with _client(world) as c:
        assert (await c.get("/documents")).status_code == 200, "the shell serves the page's path"
        listing = await _html(c, "/documents")
        assert f'href="/documents/{account}"' in listing and "Home &lt;b&gt;" in listing and "<td>4</td>" in listing
        page = await _html(c, f"/documents/{account}")
        assert "<script" not in page and "<img" not in page and "<b>" not in page
        # Drawn from the blocks with escaped text; the node's markdown (it escapes `<` as `\<`) beside it, as text.
        assert "<h3>Notes &lt;script&gt;alert(&quot;doc&quot;)&lt;/script&gt;</h3>" in page
        assert "<strong>bold</strong> words." in page and "&lt;img src=x onerror=" in page
        assert "&lt;script&gt;alert(&quot;doc&quot;)\\&lt;/script&gt;" in page and "**bold**" in page
        assert "Nice &lt;script&gt;alert(&quot;comment&quot;)&lt;/script&gt; <em>work</em>." in page
        assert "<h2>Comments (1)</h2>" in page and "<h2>Below (3)</h2>" in page
        assert f'href="/documents/{account}?path=%2Fchild-1"' in page
        data = (await c.get("/api/data", params={"page": f"/documents/{account}"}, headers=OWNER)).json()["data"]
        versions = data["versions"]
        assert (
            len(versions) == 2 and data["document"]["latest"] and data["document"]["version"] == versions[0]["version"]
        )
        old = await _html(c, f"/documents/{account}?v={versions[1]['version']}")
        assert "First draft." in old and "an earlier version" in old and "alert" not in old.split("<h2>")[0]
        child = await _html(c, f"/documents/{account}?path=/child-2")
        assert "Child 2." in child and "<h2>Versions</h2>" in child


async def test_children_page_and_the_pages_refuse_what_they_do_not_hold(world: World, monkeypatch: Any) -> None:
    from mcp_harness.console import documents

    monkeypatch.setattr(documents, "CHILD_PAGE", 2)
    _, account = _publish(world)
    async with _client(world) as c:
        first = (await c.get("/api/data", params={"page": f"/documents/{account}"}, headers=OWNER)).json()["data"]
        assert [x["path"] for x in first["children"]] == ["/child-0", "/child-1"] and first["nextAfter"] == "/child-1"
        second = await c.get(
            "/api/data", params={"page": f"/documents/{account}", "after": first["nextAfter"]}, headers=OWNER
        )
        assert [x["path"] for x in second.json()["data"]["children"]] == ["/child-2"]
        for page, status in (
            (f"/documents/{KeyPair.generate().account_id}", 404),
            ("/documents/not-an-account", 404),
            (f"/documents/{account}?path=/nothing-here", 404),
            (f"/documents/{account}?path=/a/../b", 400),
        ):
            refused = await c.get("/api/view", params=_params(page), headers=OWNER)
            assert refused.status_code == status, (page, refused.text)
        assert (await c.get("/api/view", params={"page": "/documents"})).status_code == 401


async def test_an_agent_token_sees_the_accounts_documents_too(world: World) -> None:
    """Blobs on the node are the account's public data, not an agent's: `read hm://` shows them to every agent."""
    _, account = _publish(world)
    async with _client(world) as c:
        assert f"/documents/{account}" in await _html(c, "/documents", OTHER)
        assert "Child 0" in await _html(c, f"/documents/{account}", OTHER)


def test_links_keep_only_targets_that_are_safe_to_follow() -> None:
    def link(target: str) -> str:
        return inline(Block(id="b", type="Paragraph", text="go", annotations=(Annotation("Link", (0,), (2,), target),)))

    assert link("javascript:alert(1)") == link("data:text/html,x") == link("JaVaScRiPt:x") == "go"
    assert link('https://example.org/"q"') == (
        '<a href="https://example.org/&quot;q&quot;" rel="noopener noreferrer nofollow">go</a>'
    )
    assert 'href="/ipfs/bafyx"' in link("ipfs://bafyx")
    assert 'href="/documents/z6Mk?path=%2Fa%2Fb&amp;v=bafyv"' in link("hm://z6Mk/a/b?v=bafyv")
    overlapping = Block(
        id="b",
        type="Paragraph",
        text="abcdef",
        annotations=(Annotation("Bold", (0,), (4,)), Annotation("Italic", (2,), (6,))),
    )
    assert inline(overlapping) == "<strong>ab</strong><strong><em>cd</em></strong><em>ef</em>"
    image = block_html(BlockNode(Block(id="i", type="Image", link="ipfs://bafyimg", attributes={"name": "pic"})))
    assert image == '<p class="media">Image: <a href="/ipfs/bafyimg" rel="noopener noreferrer nofollow">pic</a></p>'
