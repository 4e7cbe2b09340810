"""Reads of the search indexes (`hm_search.py`, `memory_search.py`): keyword matches ranked by bm25 (`ts_rank_cd` on
PostgreSQL: `store/keyword_index.py`), the candidates semantic search compares, and the names results are labelled
with. Plain functions of a connection; they block.

A document row is returned only while its resource is live (joined to `hm_documents`), with the heads of its
current version, so a result always names a version that exists now even if the index were behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcp_harness.store.keyword_index import index_for

TITLE_LIKE = ("title", "profile")
"""Ranked before body matches, as the reference ranks titles and profiles before everything else."""
MEMORY_TEXT_CHARS = 4000
"""How much of a memory file semantic search embeds (its path, then its start)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One matching row: what it is, where it is, its text and its rank (bm25 or the negated ts_rank_cd, lower is
    better; or similarity)."""

    key: str
    """`hm:<id>` or `mem:<id>` (the item's id): unique across both indexes, for blending rankings."""
    kind: str
    """title, document (a block), profile, comment, or memory."""
    account: str
    space: str
    path: str
    block: str
    tsid: str
    ts: int
    text: str
    score: float
    heads: str | None = None


_HM_COLUMNS = (
    "SELECT i.id, i.kind, i.account, i.space, i.path, i.block, i.tsid, i.ts, t.text, {score}, d.heads "
    "FROM hm_search_text t JOIN hm_search_items i ON i.id = t.{key} "
    "LEFT JOIN hm_documents d ON i.kind IN ('title', 'document') AND d.space = i.space AND d.path = i.path "
)
_HM_LIVE = "(i.kind NOT IN ('title', 'document') OR d.live = 1)"


def _hm_filter(kinds: Sequence[str], account: str | None) -> tuple[str, list[object]]:
    where = f"i.kind IN ({','.join('?' * len(kinds))}) AND {_HM_LIVE}"
    args: list[object] = list(kinds)
    if account:
        where += " AND i.account = ?"
        args.append(account)
    return where, args


def _hm_hit(row: sqlite3.Row | tuple[object, ...]) -> Hit:
    return Hit(
        key=f"hm:{row[0]}",
        kind=str(row[1]),
        account=str(row[2]),
        space=str(row[3]),
        path=str(row[4]),
        block=str(row[5]),
        tsid=str(row[6]),
        ts=int(row[7]),  # pyright: ignore[reportArgumentType]
        text=str(row[8]),
        score=float(row[9]),  # pyright: ignore[reportArgumentType]
        heads=None if row[10] is None else str(row[10]),
    )


def hm_keyword(
    conn: sqlite3.Connection, match: str, kinds: Sequence[str], account: str | None, limit: int
) -> list[Hit]:
    """The best `limit` rows matching the FTS5 expression `match`: titles and profiles first, then by bm25."""
    index = index_for(conn)
    found = index.match("hm_search_text", match, memory=False)
    if found is None:
        return []
    where, args = _hm_filter(kinds, account)
    sql = _HM_COLUMNS.format(score=found.score, key=index.key) + (
        f"WHERE {found.where} AND {where} "
        "ORDER BY CASE WHEN i.kind IN ('title', 'profile') THEN 0 ELSE 1 END, 10, i.id LIMIT ?"
    )
    return [_hm_hit(row) for row in conn.execute(sql, [*found.score_args, *found.where_args, *args, limit])]


def hm_candidates(conn: sqlite3.Connection, kinds: Sequence[str], account: str | None, limit: int) -> list[Hit]:
    """The newest `limit` rows in scope, for semantic search to compare (score 0)."""
    where, args = _hm_filter(kinds, account)
    columns = _HM_COLUMNS.format(score="0.0", key=index_for(conn).key)
    sql = columns + f"WHERE {where} ORDER BY i.ts DESC, i.id DESC LIMIT ?"
    return [_hm_hit(row) for row in conn.execute(sql, [*args, limit])]


def _memory_hit(row: sqlite3.Row | tuple[object, ...]) -> Hit:
    return Hit(
        key=f"mem:{row[0]}",
        kind="memory",
        account="",
        space="",
        path=str(row[1]),
        block="",
        tsid="",
        ts=int(row[2]) // 1_000_000,  # pyright: ignore[reportArgumentType]
        text=str(row[3]),
        score=float(row[4]),  # pyright: ignore[reportArgumentType]
    )


def memory_keyword(conn: sqlite3.Connection, agent_id: str, match: str, limit: int) -> list[Hit]:
    """The agent's memory files matching `match`, by bm25 (a hit in the path weighs more than one in the text)."""
    index = index_for(conn)
    found = index.match("memory_search_text", match, memory=True)
    if found is None:
        return []
    rows = conn.execute(
        f"SELECT f.id, f.path, f.mtime_ns, t.content, {found.score} FROM memory_search_text t "
        f"JOIN memory_search_files f ON f.id = t.{index.key} WHERE {found.where} AND f.agent_id = ? "
        "ORDER BY 5, f.id LIMIT ?",
        (*found.score_args, *found.where_args, agent_id, limit),
    )
    return [_memory_hit(row) for row in rows]


def memory_candidates(conn: sqlite3.Connection, agent_id: str, limit: int) -> list[Hit]:
    """The agent's most recently changed memory files, each as its path and the start of its text."""
    rows = conn.execute(
        "SELECT f.id, f.path, f.mtime_ns, substr(t.content, 1, ?), 0.0 FROM memory_search_files f "
        f"JOIN memory_search_text t ON t.{index_for(conn).key} = f.id WHERE f.agent_id = ? "
        "ORDER BY f.mtime_ns DESC, f.id DESC LIMIT ?",
        (MEMORY_TEXT_CHARS, agent_id, limit),
    )
    return [_memory_hit(row) for row in rows]


def titles(conn: sqlite3.Connection, resources: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The indexed name of each live document among `resources`."""
    out: dict[tuple[str, str], str] = {}
    key = index_for(conn).key
    for space, path in dict.fromkeys(resources):
        row = conn.execute(
            f"SELECT t.text FROM hm_search_items i JOIN hm_search_text t ON t.{key} = i.id "
            "WHERE i.space = ? AND i.path = ? AND i.kind = 'title'",
            (space, path),
        ).fetchone()
        if row is not None:
            out[(space, path)] = str(row[0])
    return out


def profile_names(conn: sqlite3.Connection, accounts: Iterable[str]) -> dict[str, str]:
    """The indexed profile name (its first line) of each account among `accounts` that has one."""
    out: dict[str, str] = {}
    key = index_for(conn).key
    for account in dict.fromkeys(accounts):
        row = conn.execute(
            f"SELECT t.text FROM hm_search_items i JOIN hm_search_text t ON t.{key} = i.id "
            "WHERE i.kind = 'profile' AND i.account = ?",
            (account,),
        ).fetchone()
        if row is not None:
            out[account] = str(row[0]).split("\n", 1)[0]
    return out
