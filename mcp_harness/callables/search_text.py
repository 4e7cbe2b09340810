"""What `search` does with text: a query into a safe FTS5 expression, snippets of `contextSize` runes, and the
blend of two rankings (hybrid).

The query language is the reference's (`entities.go`): every word must match, the last one as a prefix, so a query
typed half-way finds what it is heading for. Beyond it, as the contract promises, `"a phrase"` matches the words in
order and `word*` is a prefix anywhere. Everything the user typed is quoted before it reaches FTS5, so no input can
be an FTS5 syntax error or an operator (`NEAR`, `OR`, column filters): a query is only ever words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_harness.store.keyword_index import fold  # the index's fold: a snippet finds the words the index matched

_TERM = re.compile(r'"([^"]*)"?|(\S+)')
_WORD = re.compile(r"[^\W_]+")
RRF_K = 60
"""Reciprocal-rank-fusion constant (Cormack et al.; the reference's `blendSearchResults` uses the same)."""


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: the FTS5 expression and the words (folded) that snippets look for."""

    match: str
    words: tuple[str, ...]


def parse_query(text: str) -> Query | None:
    """The FTS5 expression of a query, or None when it holds no letter or digit to search for."""
    parts: list[str] = []
    words: list[str] = []
    bare_last = False
    for phrase, bare in _TERM.findall(text):
        raw = phrase if phrase or bare == "" else bare
        found = _WORD.findall(raw)
        if not found:
            continue
        prefix = bool(bare) and bare.endswith("*")
        parts.append('"' + " ".join(found) + '"' + ("*" if prefix else ""))
        words += [fold(w) for w in found]
        bare_last = bool(bare) and not prefix
    if not parts:
        return None
    if bare_last:  # the reference's trailing `*`: the last word typed may be unfinished
        parts[-1] += "*"
    return Query(" ".join(parts), tuple(dict.fromkeys(words)))


def _folded_with_map(text: str) -> tuple[str, list[int]]:
    """The folded text, and for each of its characters the index of the character of `text` it came from."""
    out: list[str] = []
    where: list[int] = []
    for i, char in enumerate(text):
        piece = fold(char)
        out.append(piece)
        where += [i] * len(piece)
    return "".join(out), where


@dataclass(frozen=True, slots=True)
class Snippet:
    text: str
    start: int
    """Code-point offset in the whole text of the word that matched (0 when none did: a semantic match)."""
    end: int
    matched: bool


def snippet(text: str, words: Sequence[str], context: int) -> Snippet:
    """The first word of `text` a query word starts, with `context` runes around it split as the reference does
    (ceil half before, the rest after), whitespace runs collapsed and `…` where the text was cut."""
    folded, where = _folded_with_map(text)
    start = end = 0
    matched = False
    if words:
        pattern = re.compile(r"(?<![^\W_])(?:" + "|".join(re.escape(w) for w in words) + r")[^\W_]*")
        found = pattern.search(folded)
        if found is not None and where:
            start = where[found.start()]
            end = where[found.end() - 1] + 1
            matched = True
    if not matched:
        end = min(len(text), context)
        before, after = 0, 0
    else:
        before = math.ceil(context / 2)
        after = context - before
    lo, hi = max(0, start - before), min(len(text), end + after)
    body = " ".join(text[lo:hi].split())
    return Snippet(("…" if lo else "") + body + ("…" if hi < len(text) else ""), start, end, matched)


def blend(rankings: Sequence[Sequence[str]], limit: int) -> list[str]:
    """Reciprocal rank fusion of rankings of keys: each key scores the sum of 1/(k + rank) over the lists it is in."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda key: -scores[key])[:limit]
