"""`new_id` is what `str(uuid.uuid4())` gives: a version-4, RFC 4122 UUID in its canonical spelling, never repeated."""

from __future__ import annotations

import uuid

from mcp_harness.store._util import new_id


def test_ids_are_canonical_random_uuids() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text
