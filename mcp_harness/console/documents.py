"""The Documents pages: what the embedded hypermedia node holds — accounts, a document as the node renders it
(markdown), its children, its versions and its comments — data and HTML in one place.

Blobs on the node are the account's public data, not any agent's (store/migrations.py m005), as `read hm://` treats
them: every caller of the account sees them, an agent-scoped token too. Documents are other people's words, so
every value goes out escaped: a document is drawn from its blocks with a fixed set of tags (document_html.py), and
the markdown the node renders is shown beside it as text.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from mcp_harness import cursors
from mcp_harness.console.document_html import tree_html
from mcp_harness.console.render import e, when
from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.scope import Scope

if TYPE_CHECKING:
    from mcp_harness.hypermedia.node import Node
    from mcp_harness.store.db import Database

ACCOUNT_PAGE = 50
CHILD_PAGE = 50
COMMENT_PAGE = 50
VERSIONS_SHOWN = 50
"""The newest versions listed; the walk of the change graph stops there, so a long history costs what it shows."""
_ACCOUNT = re.compile(r"z[1-9A-HJ-NP-Za-km-z]{20,100}")
"""An account id as the node keys spaces: base58btc multibase of a public key."""


class HasNode(Protocol):
    @property
    def db(self) -> Database: ...
    @property
    def hypermedia(self) -> Node: ...


def account_list(directory: HasNode, scope: Scope, after: str | None = None) -> dict[str, Any]:
    """The accounts with live documents here, by id, a page at a time (`after`: the last id of the page before)."""
    with directory.db.reading() as conn:
        rows = conn.execute(
            "SELECT space, COUNT(*) FROM hm_documents WHERE live = 1 AND space > ? GROUP BY space ORDER BY space "
            "LIMIT ?",
            (after or "", ACCOUNT_PAGE + 1),
        ).fetchall()
    node = directory.hypermedia
    accounts = []
    for space, count in rows[:ACCOUNT_PAGE]:
        accounts.append({"id": space, "name": _account_name(node, space), "documents": int(count)})
    data: dict[str, Any] = {"accounts": accounts}
    if len(rows) > ACCOUNT_PAGE:
        data["nextAfter"] = accounts[-1]["id"]
    return data


def _account_name(node: Node, account: str) -> str:
    """The account's profile name, else its home document's name, else nothing (the id stands in)."""
    name = (node.profile(account) or {}).get("name")
    if name:
        return str(name)
    try:
        return node.document(account, "").name
    except NotFound:
        return ""


def document_view(directory: HasNode, scope: Scope, account: str, params: Mapping[str, str]) -> dict[str, Any]:
    """One path of an account: its document (at `v`, else the latest) as markdown with its versions and comments,
    and the documents below it.

    Raises:
        NotFound: no such account here, or nothing at the path.
        BadRequest: a malformed path, version or page cursor.
    """
    from mcp_harness.hypermedia.markdown import bound_rendered, render_markdown
    from mcp_harness.hypermedia.node import comment_tree

    if not _ACCOUNT.fullmatch(account):
        raise NotFound(f"No account {account!r} on this node. The Documents page lists the accounts it holds.")
    path = _path(params.get("path", ""))
    node = directory.hypermedia
    data: dict[str, Any] = {"account": account, "path": path, "name": _account_name(node, account)}
    after = params.get("after") or None
    if after is not None and not after.startswith(path + "/"):
        raise BadRequest("after must be a child path of this page, as its next-page link gives it.")
    children = node.children(account, path, after=after, limit=CHILD_PAGE + 1)
    data["children"] = [
        {"path": c.path, "name": c.name, "updateTime": c.state.update_time} for c in children[:CHILD_PAGE]
    ]
    data["totalChildren"] = node.child_count(account, path)
    if len(children) > CHILD_PAGE:
        data["nextAfter"] = children[CHILD_PAGE - 1].path
    try:
        latest = node.document(account, path)
    except NotFound:
        if data["children"] or data["totalChildren"]:
            return data  # a directory without a document of its own
        raise
    version = params.get("v") or None
    document = node.document(account, path, version) if version else latest
    markdown, truncated = bound_rendered(
        render_markdown(document.state.tree, document.state.metadata, block_ids=False, frontmatter=True)
    )
    data["document"] = {
        "id": document.id,
        "name": document.name,
        "version": document.version,
        "latest": document.version == latest.version,
        "markdown": markdown,
        "html": tree_html(document.state.tree),
        "truncated": truncated,
        "authors": list(document.state.authors),
        "updateTime": document.state.update_time,
    }
    data["versions"] = _versions(directory.db, latest.state.heads)
    comment_after = cursors.decode_keyset(params["comments"]) if params.get("comments") else None
    if params.get("comments") and comment_after is None:
        raise BadRequest("comments must be the cursor of this page's next-comments link.")
    comments = node.comments_page(latest.space, latest.path, after=comment_after, limit=COMMENT_PAGE + 1)
    data["comments"] = [
        {
            "id": f"hm://{c.id}",
            "author": c.row.author,
            "createTime": c.row.ts,
            "replyParent": c.row.reply_parent if c.row.reply_parent != c.row.cid else None,
            "html": tree_html(comment_tree(c.body)),
        }
        for c in comments[:COMMENT_PAGE]
    ]
    data["totalComments"] = node.comment_count(latest.space, latest.path)
    if len(comments) > COMMENT_PAGE:
        last = comments[COMMENT_PAGE - 1].row
        data["nextComments"] = cursors.encode_keyset(last.ts, last.cid)
    return data


def _path(raw: str) -> str:
    path = raw.strip().rstrip("/")
    if path and not path.startswith("/"):
        path = "/" + path
    if any(part in ("", ".", "..") for part in path.split("/")[1:]) or len(path) > 1000:
        raise BadRequest(f"path {raw!r} is not a document path: give /segments/like/this, or nothing for the home.")
    return path


def _versions(db: Database, heads: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """The newest `VERSIONS_SHOWN` changes reachable from `heads`, newest first: each is a version one can open."""
    seen: set[str] = set()
    frontier: list[tuple[int, str]] = []
    out: list[dict[str, Any]] = []
    rows: dict[str, tuple[str, int, list[str]]] = {}
    with db.reading() as conn:

        def push(cids: list[str]) -> None:
            fresh = [c for c in cids if c not in seen]
            seen.update(fresh)
            if not fresh:
                return
            marks = ",".join("?" * len(fresh))
            query = f"SELECT cid, author, ts, deps FROM hm_changes WHERE cid IN ({marks})"
            for cid, author, ts, deps in conn.execute(query, fresh).fetchall():
                heapq.heappush(frontier, (-int(ts), cid))
                rows[cid] = (author, int(ts), [d for d in str(deps).split(".") if d])

        push(list(heads))
        while frontier and len(out) < VERSIONS_SHOWN:
            _, cid = heapq.heappop(frontier)
            author, ts, deps = rows[cid]
            if deps:  # the genesis change (no deps) holds no content: not a version anyone wrote
                out.append({"version": cid, "author": author, "ts": ts})
            push(deps)
    return out


# -- HTML -------------------------------------------------------------------------------------------------------


def _href(account: str, **query: str | None) -> str:
    given = {k: v for k, v in query.items() if v}
    return f"/documents/{e(account)}" + (f"?{e(urlencode(given))}" if given else "")


def render_accounts(data: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<tr><td><a href="{_href(a["id"])}">{e(a["name"] or a["id"])}</a></td><td><code>{e(a["id"])}</code></td>'
        f"<td>{a['documents']}</td></tr>"
        for a in data["accounts"]
    )
    more = ""
    if "nextAfter" in data:
        more = f'<p><a href="/documents?{e(urlencode({"after": data["nextAfter"]}))}">next page</a></p>'
    return (
        '<h1>Documents</h1><table class="list documents"><thead><tr><th>account</th><th>id</th><th>documents</th>'
        f"</tr></thead><tbody>{rows or '<tr><td colspan=3>No documents on this node.</td></tr>'}</tbody></table>{more}"
    )


def render_document(data: Mapping[str, Any]) -> str:
    account, path = data["account"], data["path"]
    crumbs = ['<a href="/documents">Documents</a>', f'<a href="{_href(account)}">{e(data["name"] or account)}</a>']
    walked = ""
    for part in [p for p in path.split("/") if p]:
        walked += "/" + part
        crumbs.append(f'<a href="{_href(account, path=walked)}">{e(part)}</a>')
    out = [f"<h1>{' / '.join(crumbs)}</h1>"]
    doc = data.get("document")
    if doc:
        state = "latest" if doc["latest"] else f'an earlier version · <a href="{_href(account, path=path)}">latest</a>'
        out.append(
            f'<p class="muted"><code>{e(doc["id"])}</code> · version <code>{e(doc["version"][:16])}…</code> ({state})'
            f" · updated {when(doc['updateTime'])}</p>"
        )
        # `html` is built from escaped text and a fixed set of tags only (document_html.py).
        out.append(f'<article class="document">{doc["html"]}</article>')
        out.append(
            '<details class="raw" data-key="markdown"><summary>markdown (as the node renders it)</summary>'
            f'<pre class="markdown">{e(doc["markdown"])}</pre></details>'
        )
    out.append(_children(data))
    if doc:
        out.append(_versions_html(data))
        out.append(_comments_html(data))
    return "".join(out)


def _children(data: Mapping[str, Any]) -> str:
    account = data["account"]
    if not data["children"]:
        return ""
    rows = "".join(
        f'<tr><td><a href="{_href(account, path=c["path"])}">{e(c["name"] or c["path"].rsplit("/", 1)[-1])}</a></td>'
        f"<td><code>{e(c['path'])}</code></td><td>{when(c['updateTime'] or None)}</td></tr>"
        for c in data["children"]
    )
    more = ""
    if "nextAfter" in data:
        more = f'<p><a href="{_href(account, path=data["path"], after=data["nextAfter"])}">next page</a></p>'
    return (
        f'<h2>Below ({data["totalChildren"]})</h2><table class="list children"><thead><tr><th>name</th><th>path</th>'
        f"<th>updated</th></tr></thead><tbody>{rows}</tbody></table>{more}"
    )


def _versions_html(data: Mapping[str, Any]) -> str:
    account, path, current = data["account"], data["path"], data["document"]["version"]
    items = "".join(
        f'<li><a href="{_href(account, path=path, v=v["version"])}"><code>{e(v["version"][:16])}…</code></a> '
        f"by <code>{e(v['author'][:12])}…</code> {when(v['ts'])}{' · shown' if v['version'] == current else ''}</li>"
        for v in data["versions"]
    )
    return f'<h2>Versions</h2><ol class="versions">{items}</ol>'


def _comments_html(data: Mapping[str, Any]) -> str:
    items = "".join(
        f'<li class="comment"><p class="muted"><code>{e(c["author"][:12])}…</code> {when(c["createTime"])}'
        f'{" · reply" if c["replyParent"] else ""}</p><div class="comment-body">{c["html"]}</div></li>'
        for c in data["comments"]
    )
    more = ""
    if "nextComments" in data:
        href = _href(data["account"], path=data["path"], comments=data["nextComments"])
        more = f'<p><a href="{href}">more comments</a></p>'
    body = f'<ul class="comments">{items}</ul>' if items else "<p>No comments.</p>"
    return f"<h2>Comments ({data['totalComments']})</h2>{body}{more}"


__all__ = ["HasNode", "account_list", "document_view", "render_accounts", "render_document"]
