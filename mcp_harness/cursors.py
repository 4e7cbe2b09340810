"""Paging: cursors opaque to the model, the canonical unpadded base64url of a position this server wrote.

Every paged listing (`thread:`, `/:directory`, and resources/list's `after:` form) hands back a `nextCursor` naming
where the next page starts. Only the exact spelling this module writes is accepted back, so each position has one
cursor and a hand-made one is refused rather than guessed at. `page_limit` is the one check of a page's size.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from mcp_harness.errors import BadRequest


def encode(position: str) -> str:
    return base64.urlsafe_b64encode(position.encode("utf-8")).decode("ascii").rstrip("=")


def decode(cursor: object) -> str | None:
    """The position a cursor names, or None when it is not one this module wrote."""
    if not isinstance(cursor, str) or not cursor:
        return None
    try:
        position = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
    except ValueError:
        return None
    return position if encode(position) == cursor else None


def encode_keyset(stamp: int, key: str) -> str:
    """The cursor of a listing ordered by (a timestamp, a tie-breaking id): the last row of the page before."""
    return encode(f"{stamp}:{key}")


def decode_keyset(cursor: object) -> tuple[int, str] | None:
    """The (timestamp, id) an `encode_keyset` cursor names, or None when it is not one."""
    stamp, _, key = (decode(cursor) or "").partition(":")
    return (int(stamp), key) if stamp.isdigit() and key else None


def page_limit(options: dict[str, Any], form: str, default: int, maximum: int) -> int:
    """`options.limit` of a paged listing: an integer from 1 to `maximum` (`default` when absent); 400 otherwise."""
    limit = options.get("limit", default)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise BadRequest(f"{form} option limit must be an integer from 1 to {maximum}; got {json.dumps(limit)}.")
    return limit
