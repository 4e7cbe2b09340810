"""Memory path rules (HARNESS §3): one normalizer, applied before anything touches the disk."""

from __future__ import annotations

from mcp_harness.errors import BadRequest

MAX_MEMORY_PATH_DEPTH = 16
MAX_MEMORY_PATH_BYTES = 512
MAX_SEGMENT_BYTES = 255
"""The file systems' own limit on one name, refused up front rather than failing on disk."""


def normalize_memory_path(raw: object, *, allow_root: bool = False) -> str:
    """Return the canonical relative form of a memory path, or raise `BadRequest`.

    Backslashes count as separators and empty and `.` segments are dropped, so `/notes//./deep\\file.txt` is
    `notes/deep/file.txt`. The root (`""`) is only accepted where `allow_root` says so (listings).
    """
    if not isinstance(raw, str):
        raise BadRequest("Memory path must be a string, like ~/memory/notes/today.md.")
    if "\x00" in raw:
        raise BadRequest("Memory path contains an invalid character (NUL). Use a plain relative path.")
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
    path = "/".join(segments)
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadRequest("Memory path contains an invalid character (a lone surrogate). Use valid UTF-8.") from None
    if size > MAX_MEMORY_PATH_BYTES:
        raise BadRequest(f"Memory path is too long ({size} bytes); at most {MAX_MEMORY_PATH_BYTES} bytes are accepted.")
    return path
