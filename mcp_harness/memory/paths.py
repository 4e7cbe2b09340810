"""Memory path rules (HARNESS §3): one normalizer, applied before anything touches the disk, and the rule for on-disk
names it could never produce.

Code run by `call execute` can create any name the file system allows; the harness's own writes cannot. A name is
*addressable* when a memory address can carry it: valid UTF-8, no control character (C0, DEL, C1, U+2028, U+2029),
no backslash (it is a separator in addresses), and the whole path within the depth and size limits. Listings still
show an unaddressable entry — escaped, flagged `addressable: false` — so one odd name never hides the rest of a
listing, and the agent can see what to rename. Names under the reserved temp prefix are never listed at all.
"""

from __future__ import annotations

import re

from mcp_harness.errors import BadRequest

MAX_MEMORY_PATH_DEPTH = 16
MAX_MEMORY_PATH_BYTES = 512
MAX_SEGMENT_BYTES = 255
"""The file systems' own limit on one name, refused up front rather than failing on disk."""
TMP_PREFIX = ".mcp-harness-tmp-"
"""Reserved for the temp files of atomic writes: never listed, never writable by address, swept when stale."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Anything a memory address cannot carry in a name: surrogates (undecodable bytes, as `os` hands them over),
# control characters, and the backslash (addresses treat it as `/`).
_UNADDRESSABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\\\\\ud800-\udfff]")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def normalize_memory_path(raw: object, *, allow_root: bool = False) -> str:
    """Return the canonical relative form of a memory path, or raise `BadRequest`.

    Backslashes count as separators and empty and `.` segments are dropped, so `/notes//./deep\\file.txt` is
    `notes/deep/file.txt`. The root (`""`) is only accepted where `allow_root` says so (listings).
    """
    if not isinstance(raw, str):
        raise BadRequest("Memory path must be a string, like ~/memory/notes/today.md.")
    if "\x00" in raw:
        raise BadRequest("Memory path contains an invalid character (NUL). Use a plain relative path.")
    control = _CONTROL.search(raw)
    if control:
        # Such a name would break every line-based view of the tree (listings, the run's space index).
        raise BadRequest(
            f"Memory path contains a control character (U+{ord(control.group()):04X}); names must be printable."
        )
    segments = [s for s in raw.replace("\\", "/").split("/") if s not in ("", ".")]
    if not segments:
        if allow_root:
            return ""
        raise BadRequest("Memory path is required: name a file under ~/memory/, like ~/memory/notes.md.")
    if ".." in segments:
        raise BadRequest('Memory path cannot contain "..": paths are relative to the memory root.')
    if len(segments) > MAX_MEMORY_PATH_DEPTH:
        raise BadRequest(
            f"Memory path is too deep ({len(segments)} segments); at most {MAX_MEMORY_PATH_DEPTH} are accepted."
        )
    for segment in segments:
        if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
            raise BadRequest(
                f"Memory path segment {segment[:24]!r}… is too long; each name holds at most {MAX_SEGMENT_BYTES} bytes."
            )
        if segment.startswith(TMP_PREFIX):
            raise BadRequest(f"Memory names starting with {TMP_PREFIX} are reserved for the harness's own temp files.")
    path = "/".join(segments)
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadRequest("Memory path contains an invalid character (a lone surrogate). Use valid UTF-8.") from None
    if size > MAX_MEMORY_PATH_BYTES:
        raise BadRequest(f"Memory path is too long ({size} bytes); at most {MAX_MEMORY_PATH_BYTES} bytes are accepted.")
    return path


def is_addressable(parts: list[str]) -> bool:
    """Whether an address can name the on-disk path `parts` (names as `os` returns them, surrogate-escaped)."""
    if len(parts) > MAX_MEMORY_PATH_DEPTH or any(_UNADDRESSABLE.search(p) for p in parts):
        return False
    return len("/".join(parts).encode("utf-8")) <= MAX_MEMORY_PATH_BYTES


def child_addressable(name: str, parts: list[str]) -> bool:
    """`is_addressable([*parts, name])` for `parts` already known addressable, checking only what `name` adds."""
    return not unaddressable_children([name], parts)


def unaddressable_children(names: list[str], parts: list[str]) -> set[str]:
    """Those of `names` (one directory's) that no address can carry under `parts`, which is known addressable.

    A listing asks this of every name in a directory, so the usual case — no odd name, none too long — costs one
    regex pass over all the names joined (by "/", which no name holds) and no per-name work.
    """
    if len(parts) >= MAX_MEMORY_PATH_DEPTH:
        return set(names)
    bad: set[str] = set()
    if _UNADDRESSABLE.search("/".join(names)):
        bad = {n for n in names if _UNADDRESSABLE.search(n)}
    prefix = sum(len(p.encode("utf-8")) + 1 for p in parts)
    if prefix + 4 * max(map(len, names), default=0) > MAX_MEMORY_PATH_BYTES:  # a character is at most 4 bytes
        bad |= {n for n in names if n not in bad and prefix + len(n.encode("utf-8")) > MAX_MEMORY_PATH_BYTES}
    return bad


def display_names(names: list[str]) -> dict[str, str]:
    """`{shown: name}` for those of `names` that `display_name` escapes (usually none: one regex pass)."""
    if not _UNADDRESSABLE.search("/".join(names)):
        return {}
    return {shown: n for n in names if (shown := display_name(n)) != n}


def display_name(name: str) -> str:
    """`name` as listings show it: unchanged when addressable, else escaped to printable, valid UTF-8.

    An undecodable byte shows as `\\xNN`, a control character as `\\n`, `\\t`, `\\xNN` or `\\uNNNN`, and a backslash
    as `\\\\`. Only names an address cannot carry are escaped, so the escaped form never collides with a real name
    that an address could reach (a real backslash would make that name unaddressable too).
    """
    if not _UNADDRESSABLE.search(name):
        return name
    return _UNADDRESSABLE.sub(_escape, name)


def display_path(parts: list[str]) -> str:
    return "/".join(display_name(p) for p in parts)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as surrogateescape carries it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
