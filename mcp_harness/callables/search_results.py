"""How `search` answers: each matching row as a result the model can follow, and the whole as the reference's
`{summary, markdown, query, searchType, includeBody, results}` (plus `scope`, and `partial` / `notes` when coverage
was not complete).

A result's `url` is what `read` takes: a document at its current version (`?v=<version>&l`, the reference's form for
"this version, which is the latest"), with `#<block>` when a block matched; a comment `hm://<author>/<tsid>`; a
profile `hm://<account>`; a memory file `~/memory/<path>`.
"""

from __future__ import annotations

from typing import Any

from mcp_harness.callables.search_text import Query, snippet
from mcp_harness.store._util import iso_time
from mcp_harness.store.db import Database
from mcp_harness.store.search_queries import Hit, profile_names, titles
from mcp_harness.verbs.base import VerbResult

TYPES = {"title": "document", "document": "document", "profile": "profile", "comment": "comment", "memory": "memory"}


def _ancestors(path: str) -> list[str]:
    """The paths above a document's, home document first: "/a/b" → ["", "/a"]."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) if i else "" for i in range(len(parts))]


def _doc_url(hit: Hit) -> str:
    url = f"hm://{hit.space}{hit.path}"
    return url + (f"?v={hit.heads}&l" if hit.heads else "")


def render(db: Database, hits: list[Hit], query: Query, context: int) -> list[dict[str, Any]]:
    """The results of `hits`, in order, labelled with the names the index holds."""
    with db.reading() as conn:
        docs = [(h.space, h.path) for h in hits if h.kind in ("title", "document", "comment")]
        parents = [(h.space, a) for h in hits if h.kind in ("title", "document") for a in _ancestors(h.path)]
        names = titles(conn, [*docs, *parents])
        people = profile_names(conn, [h.account for h in hits if h.kind == "comment"])
    out: list[dict[str, Any]] = []
    for hit in hits:
        cut = snippet(hit.text, query.words, context)
        item: dict[str, Any] = {"type": TYPES[hit.kind]}
        if hit.kind in ("title", "document"):
            url = _doc_url(hit)
            name = names.get((hit.space, hit.path)) or f"hm://{hit.space}{hit.path}"
            item["title"] = name
            if hit.kind == "document":
                url += f"#{hit.block}"
                item["blockId"] = hit.block
                item["range"] = [cut.start, cut.end] if cut.matched else None
            item["url"] = url
            item["parentNames"] = [names[(hit.space, a)] for a in _ancestors(hit.path) if (hit.space, a) in names]
        elif hit.kind == "profile":
            item["title"] = hit.text.split("\n", 1)[0]
            item["url"] = f"hm://{hit.account}"
        elif hit.kind == "comment":
            target = f"hm://{hit.space}{hit.path}"
            author = people.get(hit.account) or hit.account
            item["title"] = f"Comment by {author} on {names.get((hit.space, hit.path)) or target}"
            item["url"] = f"hm://{hit.account}/{hit.tsid}"
            item["target"] = target
        else:
            item["title"] = hit.path
            item["url"] = f"~/memory/{hit.path}"
            if cut.matched:
                item["line"] = hit.text.count("\n", 0, cut.start) + 1
        item["snippet"] = cut.text
        item["versionTime"] = iso_time(hit.ts) if hit.ts > 0 else None
        item["score"] = round(hit.score, 6)
        out.append({k: v for k, v in item.items() if v is not None})
    return out


def answer(
    query: str, mode: str, include_body: bool, scope: str, results: list[dict[str, Any]], notes: list[str]
) -> VerbResult:
    """The reference's result shape and markdown, with `scope` and any notes on partial coverage."""
    count = len(results)
    plural = "" if count == 1 else "s"
    header = (
        f'Search results for "{query}" ({count} result{plural}, search type: {mode}, include body: '
        f"{'yes' if include_body else 'no'}, scope: {scope})"
    )
    lines = [header, ""] if results else []
    for index, result in enumerate(results, start=1):
        lines.append(f"{index}. [{result['title']}]({result['url']})")
        lines.append(f"   - Type: {result['type']}")
        if result.get("parentNames"):
            lines.append(f"   - Parents: {' / '.join(result['parentNames'])}")
        if result.get("snippet"):
            lines.append(f"   - Match: {result['snippet']}")
        if result.get("versionTime"):
            lines.append(f"   - Updated: {result['versionTime']}")
        lines += [f"   - URL: {result['url']}", ""]
    if not results:
        lines.append(
            f'No results found for "{query}" (search type: {mode}, include body: '
            f"{'yes' if include_body else 'no'}, scope: {scope})."
        )
    lines += [f"Note: {note}" for note in notes]
    data: dict[str, Any] = {
        "summary": f'Found {count} result{plural} for "{query}".' if results else f'No results found for "{query}".',
        "markdown": "\n".join(lines).rstrip(),
        "query": query,
        "searchType": mode,
        "includeBody": include_body,
        "scope": scope,
        "results": results,
    }
    if notes:
        data["partial"] = True
        data["notes"] = notes
    return VerbResult.of(data, data["markdown"])
