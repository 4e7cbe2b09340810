"""The keyword indexes' one interface, two backends: FTS5 on SQLite, `tsvector` under GIN on PostgreSQL.

`hm_search.py`, `memory_search.py` and `search_queries.py` write and read their text tables through `index_for(conn)`:
an `Fts5Index` (the virtual tables of migration m015, keyed by rowid, `MATCH`, `bm25`) or a `TsvectorIndex` (the
tables `store/pg_ddl.py` creates for m015, keyed by the item's `id`, `@@ to_tsquery`, `ts_rank_cd`).

On PostgreSQL the words are made here, not by the database: the text is folded (NFKD, combining marks dropped,
casefolded) and split at every character that is not a letter or digit, the rule of FTS5's `unicode61
remove_diacritics 2`, and `to_tsvector('simple', …)` only receives those words. PostgreSQL's own parser would keep
`example.com`, `notes.md` or `1.5` as single tokens (FTS5 splits them), and under the `C` locale its lowercasing and
character classes know ASCII only, so `Über` would not match `über`; `unaccent` (in Debian's package) would fold
accents but fix neither. The query goes through the same fold, so both sides agree whatever the locale.

A tsvector holds at most 1 MB: a memory file of many distinct words is indexed on PostgreSQL up to that size
(`MAX_TSVECTOR_BYTES`, estimated from above); FTS5 has no such bound. Scores: FTS5's bm25 and the negated
`ts_rank_cd` are both "lower is better" but not comparable numbers; only the orderings they share are promised.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Protocol

from mcp_harness.store.dialect import backend
from mcp_harness.store.port import Connection

MAX_TSVECTOR_BYTES = 1_000_000
"""Below PostgreSQL's 1 MiB limit on one tsvector, with room for the estimate's slack."""
MEMORY_WEIGHTS = "{0.25, 0.25, 0.25, 1.0}"
"""ts_rank_cd's weights (D, C, B, A): the path (A) weighs four times the text (D), as `bm25(…, 4.0, 1.0)` does."""

_PATH_BYTES = 64 * 1024
"""Of a memory file's tsvector, what its path may take (a path is short; the text gets the rest)."""
_WORD = re.compile(r"[^\W_]+")
_PHRASE = re.compile(r'"([^"]*)"(\*?)')


def fold(text: str) -> str:
    """Case- and accent-folded as FTS5's `unicode61 remove_diacritics 2` compares (callables/search_text.py's `fold`,
    which the snippets use: the store may not import callables)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def words(text: str, budget: int = MAX_TSVECTOR_BYTES) -> str:
    """The folded words of `text`, space-separated, as many from the start as fit a tsvector of `budget` bytes
    (each distinct word costs its bytes and an entry, each occurrence a position, at most 256 per word)."""
    out: list[str] = []
    seen: dict[str, int] = {}
    size = 8
    for word in _WORD.findall(fold(text)):
        count = seen.get(word, 0)
        cost = (len(word.encode()) + 9) if count == 0 else (2 if count < 256 else 0)
        if size + cost > budget:
            break
        size += cost
        seen[word] = count + 1
        out.append(word)
    return " ".join(out)


def tsquery(match: str) -> str | None:
    """The `to_tsquery` text of an FTS5 expression as `callables/search_text.parse_query` writes it (quoted phrases,
    a `*` after one for a prefix, all of them required): phrases become `<->` chains, a prefix `:*` on the last
    word, and every phrase `&`. None when no word is left after folding."""
    parts: list[str] = []
    for phrase, star in _PHRASE.findall(match):
        found = _WORD.findall(fold(phrase))
        if found:
            parts.append(" <-> ".join(f"'{w}'" for w in found) + (":*" if star else ""))
    return " & ".join(parts) or None


@dataclass(frozen=True, slots=True)
class Match:
    """How a read ranks and filters by a query: a score expression (lower is better) and a condition, each with its
    arguments in the order they appear (the score comes first in the SELECT list)."""

    score: str
    score_args: tuple[object, ...]
    where: str
    where_args: tuple[object, ...]


class KeywordIndex(Protocol):
    """What differs between the two backends' keyword indexes; the rest of the SQL is shared."""

    key: str
    """The text tables' column that is their item's id (`t.<key> = i.id`)."""

    def add_hm(self, conn: Connection, item_id: int, text: str) -> None: ...

    def add_memory(self, conn: Connection, file_id: int, path: str, content: str) -> None: ...

    def match(self, table: str, expression: str, *, memory: bool) -> Match | None:
        """None: the expression holds nothing to look up (nothing matches)."""
        ...


class Fts5Index:
    key = "rowid"

    def add_hm(self, conn: Connection, item_id: int, text: str) -> None:
        conn.execute("INSERT INTO hm_search_text (rowid, text) VALUES (?, ?)", (item_id, text))

    def add_memory(self, conn: Connection, file_id: int, path: str, content: str) -> None:
        conn.execute("INSERT INTO memory_search_text (rowid, path, content) VALUES (?,?,?)", (file_id, path, content))

    def match(self, table: str, expression: str, *, memory: bool) -> Match | None:
        score = f"bm25({table}, 4.0, 1.0)" if memory else f"bm25({table})"
        return Match(score, (), f"{table} MATCH ?", (expression,))


class TsvectorIndex:
    key = "id"

    def add_hm(self, conn: Connection, item_id: int, text: str) -> None:
        text = text.replace("\x00", "\ufffd")  # PostgreSQL's text cannot hold NUL
        conn.execute(
            "INSERT INTO hm_search_text (id, text, tsv) VALUES (?, ?, to_tsvector('simple', ?))",
            (item_id, text, words(text)),
        )

    def add_memory(self, conn: Connection, file_id: int, path: str, content: str) -> None:
        # memory_search.py reads no file holding NUL (it indexes those by path alone): content is valid text here.
        conn.execute(
            "INSERT INTO memory_search_text (id, path, content, tsv) VALUES "
            "(?, ?, ?, setweight(to_tsvector('simple', ?), 'A') || to_tsvector('simple', ?))",
            (file_id, path, content, words(path, _PATH_BYTES), words(content, MAX_TSVECTOR_BYTES - _PATH_BYTES)),
        )

    def match(self, table: str, expression: str, *, memory: bool) -> Match | None:
        query = tsquery(expression)
        if query is None:
            return None
        weights = f"'{MEMORY_WEIGHTS}', " if memory else ""
        # Normalization 1 (rank / (1 + log length)): a shorter text ranks first on equal matches, as bm25 has it.
        score = f"-ts_rank_cd({weights}t.tsv, to_tsquery('simple', ?), 1)"
        return Match(score, (query,), "t.tsv @@ to_tsquery('simple', ?)", (query,))


FTS5 = Fts5Index()
TSVECTOR = TsvectorIndex()


def index_for(conn: object) -> KeywordIndex:
    """The keyword index of the database `conn` talks to."""
    return TSVECTOR if backend(conn) == "postgres" else FTS5


__all__ = ["FTS5", "TSVECTOR", "KeywordIndex", "Match", "fold", "index_for", "tsquery", "words"]
