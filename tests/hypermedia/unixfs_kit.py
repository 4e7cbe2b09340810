"""Deterministic file bytes both the Python tests and tests/js/unixfs_oracle.mjs build from a seed, so megabytes
never cross the pipe to Node: segment j (32 KiB) is sha256("<seed>:<j>") repeated, so every 256 KiB chunk differs."""

from __future__ import annotations

import hashlib

SEGMENT = 32768
K = 262_144
"""One chunk: 256 KiB."""


def file_bytes(size: int, seed: str) -> bytes:
    out = bytearray()
    j = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{j}".encode()).digest() * (SEGMENT // 32)
        j += 1
    return bytes(out[:size])
