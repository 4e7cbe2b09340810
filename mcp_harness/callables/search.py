"""The `search` callable (HARNESS §5): the embedded node's documents, profiles and comments — and, beyond the
reference, the agent's memory files — ranked, with `hm://` ids (block refs where a block matched) and snippets.

- `keyword`: SQLite FTS5 over indexes kept current as blobs are stored (`store/hm_search.py`) and reconciled with
  the memory tree before a memory search (`store/memory_search.py`); titles and profiles first, then bm25.
- `semantic`: cosine similarity of embeddings from the configured provider (`models/embeddings.py`) over the newest
  `MAX_SEMANTIC_CANDIDATES` items in scope; vectors are kept by text (`store/search_vectors.py`), and at most
  `MAX_EMBEDDED_PER_SEARCH` unembedded items are embedded per search (the result says when coverage was partial).
- `hybrid`: both, blended by reciprocal rank; a failing semantic leg leaves the keyword results, with a note.

With no embedder configured, `semantic` and `hybrid` are refused naming the setting, and a search that names no
`searchType` is keyword (the reference degrades hybrid the same way). Input the contract cannot express (a query
with no word in it, an `accountUid` that is not an account id) gets the contract back, like any contract miss.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from mcp_harness.callables import search_results
from mcp_harness.callables.search_spec import DEFAULT_CONTEXT, MAX_EMBEDDED_PER_SEARCH, MAX_SEMANTIC_CANDIDATES, SEARCH
from mcp_harness.callables.search_text import Query, blend, parse_query
from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.store import memory_search, search_queries, search_vectors
from mcp_harness.store.db import Database
from mcp_harness.store.search_queries import TITLE_LIKE, Hit
from mcp_harness.verbs.base import VerbContext, VerbResult, touch_expand

if TYPE_CHECKING:
    from mcp_harness.models.embeddings import Embedder


def _miss(errors: list[str]) -> VerbResult:
    return touch_expand("search", SEARCH.contract_markdown(), errors)


async def search(ctx: VerbContext, tool_input: dict[str, Any]) -> VerbResult:
    text = str(tool_input["query"]).strip()
    query = parse_query(text)
    if query is None:
        return _miss([f"$.query: {text!r} holds no letter or digit to search for"])
    account = tool_input.get("accountUid")
    if account is not None:
        # Imported on use, as everything only a search needs: a stdio server's start-up pays for none of it.
        from mcp_harness.identity.keys import public_key_of

        try:
            public_key_of(str(account))
        except BadRequest as exc:
            return _miss([f"$.accountUid: {exc.message}"])
    services = ctx.services
    settings = services.settings.search
    embedder: Embedder | None = None
    requested = tool_input.get("searchType")
    if requested in ("semantic", "hybrid") or (requested is None and settings.embeddings_provider):
        from mcp_harness.models.embeddings import embedder_for

        embedder = await anyio.to_thread.run_sync(embedder_for, services, settings)
    mode = requested or ("hybrid" if embedder is not None else "keyword")
    scope = str(tool_input.get("scope") or "hypermedia")
    include_body = bool(tool_input.get("includeBody", False))
    page = int(tool_input.get("pageSize") or (30 if len(text) < 3 else 20))
    kinds = ("title", "profile", "document", "comment") if include_body else TITLE_LIKE
    plan = _Plan(ctx.agent.id, text, query, kinds, str(account) if account else None, scope, page)
    notes: list[str] = []
    if scope != "hypermedia":
        if await _reconcile_memory(ctx):
            notes.append("The memory index is partial (a very large tree): search again to cover the rest.")
    db = services.db
    hits: list[Hit]
    if mode == "keyword":
        hits = await db.call(lambda d: _keyword(d, plan, page))
    else:
        assert embedder is not None
        keyword = await db.call(lambda d: _keyword(d, plan, page * 3)) if mode == "hybrid" else []
        try:
            semantic, partial = await _semantic(db, plan, embedder, settings.min_similarity, page * 3)
        except HarnessError as exc:
            if mode == "semantic":
                raise
            semantic, partial = [], False
            notes.append(f"Semantic ranking failed, so these are keyword results: {exc.message}")
        if partial:
            notes.append("Semantic coverage is partial: not every item has been embedded yet; search again.")
        if mode == "semantic":
            hits = semantic[:page]
        else:
            by_key = {h.key: h for h in (*keyword, *semantic)}
            hits = [by_key[k] for k in blend([[h.key for h in keyword], [h.key for h in semantic]], page)]
    context = int(tool_input.get("contextSize", DEFAULT_CONTEXT))
    results = await db.call(lambda d: search_results.render(d, hits, query, context))
    return search_results.answer(text, mode, include_body, scope, results, notes)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one search looks at."""

    agent_id: str
    text: str
    query: Query
    kinds: tuple[str, ...]
    account: str | None
    scope: str
    page: int

    @property
    def hypermedia(self) -> bool:
        return self.scope != "memory"

    @property
    def memory(self) -> bool:
        return self.scope != "hypermedia"


def _keyword(db: Database, plan: _Plan, limit: int) -> list[Hit]:
    with db.reading() as conn:
        hits = (
            search_queries.hm_keyword(conn, plan.query.match, plan.kinds, plan.account, limit)
            if plan.hypermedia
            else []
        )
        if plan.memory:
            hits += search_queries.memory_keyword(conn, plan.agent_id, plan.query.match, limit)
    hits.sort(key=lambda h: (h.kind not in TITLE_LIKE, h.score))
    return hits[:limit]


async def _reconcile_memory(ctx: VerbContext) -> bool:
    """Bring the agent's memory index up to date with its tree; True when it stopped short (`memory_search.py`)."""
    root = str(ctx.services.memory(ctx.agent).root)
    agent_id = ctx.agent.id
    db = ctx.services.db

    def known(d: Database) -> dict[str, tuple[int, int]]:
        with d.reading() as conn:
            return memory_search.indexed(conn, agent_id)

    found = await anyio.to_thread.run_sync(memory_search.changes, root, await db.call(known))
    if found.upserts or found.removed:

        def write(d: Database) -> None:
            with d.transaction() as conn:
                memory_search.apply(conn, agent_id, found)

        await db.call(write)
    return found.partial


def _embedding_text(hit: Hit) -> str:
    return f"{hit.path}\n{hit.text}" if hit.kind == "memory" else hit.text


async def _semantic(
    db: Database, plan: _Plan, embedder: Embedder, threshold: float, limit: int
) -> tuple[list[Hit], bool]:
    """Items in scope by similarity to the query (at least `threshold`), and whether some were not compared."""
    model = embedder.model

    def candidates(d: Database) -> list[Hit]:
        with d.reading() as conn:
            found: list[Hit] = []
            if plan.hypermedia:
                found += search_queries.hm_candidates(conn, plan.kinds, plan.account, MAX_SEMANTIC_CANDIDATES)
            if plan.memory:
                found += search_queries.memory_candidates(conn, plan.agent_id, MAX_SEMANTIC_CANDIDATES)
        return found

    items = await db.call(candidates)
    query_text = plan.text
    texts = {h.key: _embedding_text(h) for h in items}
    digests = {key: search_vectors.digest(t) for key, t in texts.items()}
    query_digest = search_vectors.digest(query_text)

    def known(d: Database) -> dict[bytes, Any]:
        with d.transaction() as conn:
            return search_vectors.lookup(conn, model, [query_digest, *digests.values()])

    vectors = await db.call(known)
    missing = list(dict.fromkeys(d for d in digests.values() if d not in vectors))
    wanted = missing[:MAX_EMBEDDED_PER_SEARCH]
    text_of = {digests[key]: t for key, t in texts.items()}
    inputs = ([query_text] if query_digest not in vectors else []) + [text_of[d] for d in wanted]
    if inputs:
        embedded = await embedder.embed(inputs)
        keys = ([query_digest] if query_digest not in vectors else []) + wanted
        fresh = {k: search_vectors.unit(v) for k, v in zip(keys, embedded, strict=True)}
        vectors.update(fresh)

        def keep(d: Database) -> None:
            with d.transaction() as conn:
                search_vectors.store(conn, model, fresh)

        await db.call(keep)
    target = vectors[query_digest]
    scored = [(search_vectors.dot(target, vectors[digests[h.key]]), h) for h in items if digests[h.key] in vectors]
    ranked = sorted((pair for pair in scored if pair[0] >= threshold), key=lambda pair: -pair[0])
    hits = [_with_score(h, similarity) for similarity, h in ranked[:limit]]
    return hits, len(missing) > len(wanted)


def _with_score(hit: Hit, similarity: float) -> Hit:
    return replace(hit, score=similarity)
