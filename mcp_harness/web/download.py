"""`write ~/memory/<path> {fromUrl}`: download through the guarded client into an agent's memory (HARNESS §3)."""

from __future__ import annotations

import mimetypes
import re
import time
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from mcp_harness.errors import BadRequest, Upstream
from mcp_harness.memory.paths import TMP_PREFIX, normalize_memory_path
from mcp_harness.web.reader import ContentType

if TYPE_CHECKING:
    from mcp_harness.config import Settings
    from mcp_harness.memory.store import MemoryStore
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.web.egress import Egress

_PREFERRED_EXT = {
    "text/plain": ".txt",
    "text/html": ".html",
    "text/markdown": ".md",
    "text/csv": ".csv",
    "application/json": ".json",
    "application/pdf": ".pdf",
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "application/xml": ".xml",
}
_HAS_EXT = re.compile(r"\.[A-Za-z0-9]{1,8}$")
# What a memory path refuses in a name (memory/paths.py), replaced here so a URL's odd name cannot fail the download.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\\\\/]")
_NAME_BYTES = 128


class Downloads(Protocol):
    """What a download touches: the guarded web client, the download cap in the settings, the agent's memory."""

    @property
    def settings(self) -> Settings: ...
    @property
    def web(self) -> Egress: ...
    def memory(self, agent: AgentRecord) -> MemoryStore: ...


def _file_name(url: str) -> str:
    segment = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    # unquote() decodes bytes that are not UTF-8 to U+FFFD, so the name is always valid UTF-8.
    name = _UNSAFE.sub("-", unquote(segment)).replace("..", "-").strip()
    if name.startswith(TMP_PREFIX):
        name = "download" + name  # the temp prefix is reserved; this keeps the rest of the name
    # Cut by bytes, not characters: 128 four-byte characters would pass a character cut and fail the name limit.
    name = name.encode("utf-8")[:_NAME_BYTES].decode("utf-8", "ignore").strip()
    return name if name and name not in (".", "-") else f"download-{int(time.time() * 1000)}"


def _with_extension(path: str, mime: str) -> str:
    if _HAS_EXT.search(path.rsplit("/", 1)[-1]) or not mime:
        return path
    ext = _PREFERRED_EXT.get(mime) or mimetypes.guess_extension(mime, strict=False)
    return path + ext if ext else path


def download_to_memory(host: Downloads, agent: AgentRecord, rest: str, from_url: object) -> dict[str, Any]:
    """Fetch `from_url` (capped, timed, every hop checked) and store it atomically at the memory path.

    An address naming a directory (`~/memory/` or one ending in `/`) stores under it by the URL's last path
    segment; the memory root stores under `downloads/`.
    """
    if not isinstance(from_url, str) or not from_url.strip():
        raise BadRequest("write ~/memory option fromUrl must be an http:// or https:// URL.")
    url = from_url.strip()
    directory = rest == "" or rest.endswith("/")
    if directory:
        base = normalize_memory_path(rest, allow_root=True) or "downloads"
    else:
        normalize_memory_path(rest)  # refuse a bad path before any network traffic
        base = ""
    limit = host.settings.web.max_download_bytes
    with host.web.open(url) as response:
        final = response.url
        if response.status >= 400:
            raise Upstream(f"Could not download {url}: HTTP {response.status}.")
        body = response.read(limit, refuse_over=True)
        header = response.content_type
    mime = ContentType.parse(header).mime if header else ""
    target = f"{base}/{_file_name(final)}" if directory else rest
    path = normalize_memory_path(_with_extension(target, mime))
    entry = host.memory(agent).write_file(path, body.data)
    kind = f", {mime}" if mime else ""
    return {
        "summary": f"Downloaded {final} to {path} ({entry.size} bytes{kind}).",
        "path": path,
        "size": entry.size,
        "mimeType": entry.mime_type or mime or None,
        "finalUrl": final,
        "contentType": header or None,
    }
