"""Embedding vectors of searchable text, by (model, sha-256 of the text): what semantic search does not re-embed.

Keyed by the text, not by the item: an unchanged block keeps its vector across document versions, an edited one is
embedded anew on its next semantic search, and two items with the same text share one vector. Vectors are stored
unit-length as float32, so cosine similarity is a dot product. The table is bounded: beyond `MAX_VECTORS` the ones
least recently used go (`prune`).
"""

from __future__ import annotations

import hashlib
import math
import operator
from array import array
from collections.abc import Iterable, Sequence

from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Connection

MAX_VECTORS = 200_000

SCHEMA = (
    "CREATE TABLE search_vectors (model TEXT NOT NULL, digest BLOB NOT NULL, vector BLOB NOT NULL, "
    "used_at INTEGER NOT NULL, PRIMARY KEY (model, digest)) WITHOUT ROWID",
    "CREATE INDEX search_vectors_by_use ON search_vectors (used_at)",
)


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def unit(vector: Sequence[float]) -> array[float]:
    """The vector scaled to length 1 (a zero vector stays zero), as float32."""
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return array("f", (x / norm for x in vector))


def lookup(conn: Connection, model: str, digests: Iterable[bytes]) -> dict[bytes, array[float]]:
    """The stored vectors among `digests`, marking them used."""
    wanted = list(dict.fromkeys(digests))
    found: dict[bytes, array[float]] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT digest, vector FROM search_vectors WHERE model = ? AND digest IN ({marks})", [model, *chunk]
        ).fetchall()
        for key, blob in rows:
            vector = array("f")
            vector.frombytes(bytes(blob))
            found[bytes(key)] = vector
    if found:
        now = now_ms()
        conn.executemany(
            "UPDATE search_vectors SET used_at = ? WHERE model = ? AND digest = ?", [(now, model, k) for k in found]
        )
    return found


def store(conn: Connection, model: str, vectors: dict[bytes, array[float]]) -> None:
    """Keep new vectors (inside a transaction), then drop the least recently used beyond the bound."""
    now = now_ms()
    conn.executemany(
        "INSERT INTO search_vectors (model, digest, vector, used_at) VALUES (?,?,?,?) ON CONFLICT (model, digest) "
        "DO UPDATE SET vector = excluded.vector, used_at = excluded.used_at",
        [(model, key, vector.tobytes(), now) for key, vector in vectors.items()],
    )
    prune(conn, MAX_VECTORS)


def prune(conn: Connection, keep: int) -> None:
    count = int(conn.execute("SELECT COUNT(*) FROM search_vectors").fetchone()[0])
    if count > keep:
        conn.execute(
            "DELETE FROM search_vectors WHERE (model, digest) IN "
            "(SELECT model, digest FROM search_vectors ORDER BY used_at LIMIT ?)",
            (count - keep,),
        )


def dot(a: array[float], b: array[float]) -> float:
    """Cosine similarity of two unit vectors; 0 for vectors of different models' sizes."""
    return sum(map(operator.mul, a, b)) if len(a) == len(b) else 0.0
