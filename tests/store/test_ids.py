"""`new_id` is a version-7 RFC 9562 UUID in its canonical spelling: never repeated, its first 48 bits the epoch
milliseconds it was made at, so ids made later sort after (the store's keys cluster on the newest index pages)."""

from __future__ import annotations

import time
import uuid

from mcp_harness.store._util import new_id


def test_ids_are_canonical_time_ordered_uuids() -> None:
    before = int(time.time() * 1000)
    ids = [new_id() for _ in range(2000)]
    after = int(time.time() * 1000)
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122 and str(parsed) == text
        assert before <= parsed.int >> 80 <= after  # the timestamp field: when it was made


def test_an_id_made_in_a_later_millisecond_sorts_after() -> None:
    earlier = [new_id() for _ in range(50)]
    time.sleep(0.002)
    later = [new_id() for _ in range(50)]
    assert max(earlier) < min(later)
