"""The option keys `write hm://…` accepts, by action: declared once, for the space and the handler alike."""

from __future__ import annotations

BASE_OPTIONS = ("action", "signer", "input", "skipLinkCheck")
ACTION_OPTIONS: dict[str, tuple[str, ...]] = {
    "document": (*BASE_OPTIONS, "name", "metadata"),
    "update": (*BASE_OPTIONS, "name", "metadata"),
    "comment": (*BASE_OPTIONS, "target", "replyTo"),
    "move": (*BASE_OPTIONS, "toPath"),
    "redirect": (*BASE_OPTIONS, "toUrl"),
    "delete": BASE_OPTIONS,
    "fork": (*BASE_OPTIONS, "fromUrl"),
    "profile.update": (*BASE_OPTIONS, "name", "metadata"),
}
"""The option keys each `options.action` accepts."""
FROM_PATH_OPTIONS = ("fromPath", "signer")
"""A write publishing a memory file (`options.fromPath`) takes only these."""
WRITE_OPTIONS = tuple(dict.fromkeys(key for keys in (*ACTION_OPTIONS.values(), FROM_PATH_OPTIONS) for key in keys))
READ_OPTIONS = ("cursor", "limit", "fresh")
"""A read takes options for the pages of the `/:directory` and `/:comments` views, and `fresh` (ask the configured
Seed servers for a newer version first)."""
DIRECTORY_PAGE = 100
MAX_DIRECTORY_PAGE = 500
