"""Page cursors: opaque to the model, the canonical unpadded base64url of a position this server wrote.

Every paged listing (`thread:`, `/:directory`, and resources/list's `after:` form) hands back a `nextCursor` naming
where the next page starts. Only the exact spelling this module writes is accepted back, so each position has one
cursor and a hand-made one is refused rather than guessed at.
"""

from __future__ import annotations

import base64


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
