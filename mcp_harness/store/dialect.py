"""The SQL the stores write (SQLite's), translated for PostgreSQL: the thin dialect layer of docs/postgres.md.

The stores keep one text per query, in SQLite's dialect with `?` (or `:name`) parameters; on PostgreSQL each text is
translated once (cached) into psycopg's `%s` / `%(name)s` form with the few SQLite-isms the stores use mapped:
`INSERT OR IGNORE` → `ON CONFLICT DO NOTHING`, scalar `MAX(a, b)` / `MIN(a, b)` → `GREATEST` / `LEAST`, `char()` →
`chr()`, `LIKE` → `ILIKE` (SQLite's LIKE ignores ASCII case), `x'..'` blob literals, and in DDL the storage classes
(`INTEGER` is 64-bit in SQLite: `BIGINT`; `BLOB` → `BYTEA`; `INTEGER PRIMARY KEY` → an identity column), `WITHOUT
ROWID` dropped, and a `CREATE TRIGGER … BEGIN … END` turned into a PL/pgSQL function and its trigger. What has no
faithful translation (`INSERT OR REPLACE`, `rowid`, FTS5 virtual tables, `PRAGMA`, `sqlite_schema`) is refused with
`DialectError` naming the construct and the portable form, so a store never runs a query that means something else.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from mcp_harness.errors import StorageError

Style = Literal["none", "qmark", "named"]
"""How the caller passes parameters: none (then `%` stays as is), a sequence (`?`) or a mapping (`:name`)."""


def backend(conn: object) -> Literal["sqlite", "postgres"]:
    """Which database `conn` talks to, for the few queries written per backend (search). `PgConnection` says so;
    anything else is SQLite's connection. (No import of store/pg.py: psycopg loads only on PostgreSQL.)"""
    return "postgres" if getattr(conn, "backend", None) == "postgres" else "sqlite"


class DialectError(StorageError):
    """A query uses a SQLite construct that has no faithful PostgreSQL translation."""


_TOKEN = re.compile(
    r"""(?P<str>'(?:[^']|'')*')
    |(?P<blob>[xX]'[0-9a-fA-F]*')
    |(?P<ident>"(?:[^"]|"")*")
    |(?P<comment>--[^\n]*|/\*.*?\*/)
    |(?P<cast>::)
    |(?P<param>\?)
    |(?P<named>:[A-Za-z_]\w*)
    |(?P<word>[A-Za-z_][A-Za-z_0-9$]*)
    |(?P<ws>\s+)
    |(?P<other>.)""",
    re.S | re.X,
)

_RENAMED = {"CHAR": "chr", "IFNULL": "coalesce", "INSTR": "strpos"}
_SCALAR = {"MAX": "GREATEST", "MIN": "LEAST"}
_REFUSED = {
    "ROWID": "rowid has no PostgreSQL equivalent: give the table an explicit id column and name it",
    "PRAGMA": "PRAGMA is SQLite's: ask the backend object (Database / PgDatabase) instead",
    "SQLITE_SCHEMA": "sqlite_schema is SQLite's catalog: keep per-backend DDL in store/pg_ddl.py",
    "SQLITE_MASTER": "sqlite_master is SQLite's catalog: keep per-backend DDL in store/pg_ddl.py",
    "GLOB": "GLOB has no PostgreSQL operator: use LIKE with an ESCAPE clause",
}
_DDL_TYPES = {"INTEGER": "BIGINT", "BLOB": "BYTEA", "REAL": "DOUBLE PRECISION"}


def _tokens(sql: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "other", m.group()) for m in _TOKEN.finditer(sql)]


def _next_words(tokens: list[tuple[str, str]], start: int, count: int) -> list[tuple[int, str]]:
    """The next `count` word tokens from `start` (index, upper-cased text), skipping whitespace and comments."""
    found: list[tuple[int, str]] = []
    for i in range(start, len(tokens)):
        kind, text = tokens[i]
        if kind in ("ws", "comment"):
            continue
        found.append((i, text.upper() if kind == "word" else text))
        if len(found) == count:
            break
    return found


def _top_level_commas(tokens: list[tuple[str, str]], open_index: int) -> int:
    depth, commas = 0, 0
    for kind, text in tokens[open_index:]:
        if kind != "other":
            continue
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                return commas
        elif text == "," and depth == 1:
            commas += 1
    return commas


@lru_cache(maxsize=4096)
def to_pg(sql: str, style: Style = "qmark") -> tuple[str, ...]:
    """`sql` (SQLite's dialect, one statement) as the PostgreSQL statements that mean the same.

    Raises:
        DialectError: a construct with no faithful translation; the message names it and the portable form.
    """
    stripped = sql.strip().rstrip(";")
    head = [w for _, w in _next_words(_tokens(stripped), 0, 3)]
    if head[:2] == ["CREATE", "TRIGGER"]:
        return _trigger(stripped)
    if head[:2] == ["CREATE", "VIRTUAL"]:
        raise DialectError(
            f"A virtual table ({stripped[:60]}…) has no PostgreSQL form: give the migration an entry in "
            "store/pg_ddl.py (FTS5 maps to a tsvector or trigram GIN index there)."
        )
    ddl = head[:1] == ["ALTER"] or (head[:1] == ["CREATE"] and "TABLE" in head[1:3])
    return (_statement(stripped, style, ddl=ddl),)


def _statement(sql: str, style: Style, *, ddl: bool) -> str:
    tokens = _tokens(sql)
    out: list[str] = []
    ignore_conflicts = False
    returning_at: int | None = None
    depth = 0
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        upper = text.upper()
        if kind == "other":
            depth += {"(": 1, ")": -1}.get(text, 0)
            out.append("%%" if text == "%" and style != "none" else text)
        elif kind in ("str", "ident", "comment"):
            out.append(text.replace("%", "%%") if style != "none" else text)
        elif kind == "blob":
            out.append(f"'\\x{text[2:-1]}'::bytea")
        elif kind == "param":
            follow = [w for _, w in _next_words(tokens, i + 1, 3)]
            cast = "::text" if follow[:2] == ["IS", "NULL"] or follow[:3] == ["IS", "NOT", "NULL"] else ""
            out.append("%s" + cast)  # an untyped NULL has no type PostgreSQL could infer for `IS NULL`
        elif kind == "named":
            out.append(f"%({text[1:]})s")
        elif kind == "word":
            if upper in _REFUSED:
                raise DialectError(f"{_REFUSED[upper]} (in {sql[:80]!r}).")
            nxt = _next_words(tokens, i + 1, 2)
            if upper == "INSERT" and [w for _, w in nxt] == ["OR", "REPLACE"]:
                raise DialectError(
                    "INSERT OR REPLACE deletes and re-inserts the row: write INSERT … ON CONFLICT (key) DO UPDATE "
                    f"SET …, which both backends run (in {sql[:80]!r})."
                )
            if upper == "INSERT" and [w for _, w in nxt] == ["OR", "IGNORE"]:
                ignore_conflicts = True
                out.append(text)
                i = nxt[1][0] + 1
                continue
            if upper == "RETURNING" and depth == 0:
                returning_at = len(out)
            opens = bool(nxt) and nxt[0][1] == "("
            if opens and upper in _RENAMED:
                out.append(_RENAMED[upper])
            elif opens and upper in _SCALAR and _top_level_commas(tokens, nxt[0][0]) > 0:
                out.append(_SCALAR[upper])
            elif upper == "LIKE":
                out.append("ILIKE")
            elif ddl and upper == "WITHOUT" and nxt and nxt[0][1] == "ROWID":
                i = nxt[0][0] + 1
                continue
            elif ddl and upper == "AUTOINCREMENT":
                pass
            elif ddl and upper == "INTEGER" and [w for _, w in nxt] == ["PRIMARY", "KEY"]:
                out.append("BIGINT GENERATED BY DEFAULT AS IDENTITY")
            elif ddl and upper in _DDL_TYPES:
                out.append(_DDL_TYPES[upper])
            else:
                out.append(text)
        else:
            out.append(text)
        i += 1
    if ignore_conflicts:
        clause = " ON CONFLICT DO NOTHING "
        if returning_at is None:
            out.append(clause)
        else:
            out.insert(returning_at, clause)
    return "".join(out).strip()


_TRIGGER = re.compile(
    r"CREATE\s+TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>\w+)\s+(?P<when>BEFORE|AFTER)\s+(?P<event>.+?)\s+"
    r"ON\s+(?P<table>\w+)(?:\s+FOR\s+EACH\s+ROW)?(?:\s+WHEN\s+(?P<cond>.+?))?\s+BEGIN\s+(?P<body>.*)\s*END$",
    re.S | re.I,
)


def _trigger(sql: str) -> tuple[str, ...]:
    """A SQLite row trigger as a PL/pgSQL function and the trigger that calls it (OLD/NEW mean the same)."""
    match = _TRIGGER.match(sql)
    if match is None:
        raise DialectError(
            f"This trigger's form is not translated ({sql[:80]!r}): give it an entry in store/pg_ddl.py."
        )
    name, table = match["name"], match["table"]
    body = " ".join(f"{_statement(s, 'none', ddl=False)};" for s in _split(match["body"]))
    cond = f" WHEN ({_statement(match['cond'], 'none', ddl=False)})" if match["cond"] else ""
    returned = "NULL" if match["when"].upper() == "AFTER" else ("OLD" if "DELETE" in match["event"].upper() else "NEW")
    return (
        f"CREATE FUNCTION {name}_fn() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN {body} RETURN {returned}; END "
        "$fn$",
        f"CREATE TRIGGER {name} {match['when']} {match['event']} ON {table} FOR EACH ROW{cond} "
        f"EXECUTE FUNCTION {name}_fn()",
    )


def _split(script: str) -> list[str]:
    """Statements of a trigger body, split at top-level `;` (never inside a string)."""
    parts, current = [], []
    for kind, text in _tokens(script):
        if kind == "other" and text == ";":
            parts.append("".join(current))
            current = []
        else:
            current.append(text)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


__all__ = ["DialectError", "Style", "backend", "to_pg"]
