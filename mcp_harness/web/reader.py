"""`read https://…`: a public page as markdown (HARNESS §11.2's web reader; hypermedia-first is not here).

HTML is cut to its main content — `<main>` or `role="main"`, else the largest `<article>`, else `<body>` — with
navigation, page headers and footers, scripts, styles, forms, boilerplate blocks and permalink anchors dropped, then
converted by html2text (headings, lists, links, fenced code, tables): see `extract`. Plain text, JSON and markdown
come back as they are; `options.raw` returns any text body verbatim; binary types get metadata and a hint to download
them into memory. Output is bounded at 200 KiB (UTF-8) on a character boundary, with `options.offset` /
`options.length` (characters) to page on.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from mcp_harness.errors import BadRequest, NotFound, Upstream
from mcp_harness.web.egress import Egress
from mcp_harness.web.extract import html_to_markdown

MAX_OUTPUT_BYTES = 200 * 1024
ACCEPT = "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.8,application/json;q=0.8,*/*;q=0.5"
READ_OPTIONS = ("raw", "offset", "length")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-ndjson",
        "application/rss+xml",
        "application/atom+xml",
    }
)

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ContentType:
    mime: str
    charset: str | None

    @classmethod
    def parse(cls, header: str) -> ContentType:
        mime, _, params = header.partition(";")
        charset = None
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                charset = value.strip().strip("\"'")
        return cls(mime.strip().lower(), charset)

    @property
    def is_html(self) -> bool:
        return self.mime in HTML_TYPES

    @property
    def is_text(self) -> bool:
        m = self.mime
        return m.startswith("text/") or m in TEXT_TYPES or m.endswith("+json") or m.endswith("+xml")


def sniff(data: bytes) -> ContentType:
    """The type of a body that declared none."""
    head = data[:512].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
        return ContentType("text/html", None)
    if b"\0" in data[:8192]:
        return ContentType("application/octet-stream", None)
    try:
        data[:8192].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 8188:  # a cut multi-byte character at the sample's end is not a failure
            return ContentType("application/octet-stream", None)
    return ContentType("text/plain", None)


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode(data: bytes, ctype: ContentType) -> tuple[str, str]:
    """Text and the charset used: a BOM, the declared charset, a `<meta>` charset (HTML), else UTF-8.

    Undecodable bytes become U+FFFD rather than failing the read.
    """
    for bom, name in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(name, errors="replace").lstrip("\ufeff"), name
    charset = _codec(ctype.charset)
    if charset is None and ctype.is_html:
        match = _META_CHARSET.search(data[:4096])
        charset = _codec(match.group(1).decode("ascii", "replace")) if match else None
    charset = charset or "utf-8"
    return data.decode(charset, errors="replace"), charset


def _int_option(options: dict[str, Any], key: str, minimum: int) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadRequest(f"read option {key} must be an integer >= {minimum}.")
    return value


def page(text: str, offset: int, length: int | None) -> tuple[str, int]:
    """The window of `text` from `offset`: at most `length` characters and MAX_OUTPUT_BYTES of UTF-8, cut on a
    character boundary. Returns the window and the offset just past it."""
    window = text[offset : offset + length] if length is not None else text[offset:]
    encoded = window.encode("utf-8", errors="surrogatepass")
    if len(encoded) > MAX_OUTPUT_BYTES:
        window = encoded[:MAX_OUTPUT_BYTES].decode("utf-8", errors="ignore")
    return window, offset + len(window)


def read_url(egress: Egress, url: str, options: dict[str, Any], page_limit: int) -> dict[str, Any]:
    """Fetch `url` and shape the `read` result; raises NotFound / Upstream for HTTP errors."""
    unknown = [k for k in options if k not in READ_OPTIONS]
    if unknown:
        raise BadRequest(
            f"read of a web page does not understand option(s) {', '.join(unknown)}. Supported: raw, offset, length."
        )
    raw = options.get("raw", False)
    if not isinstance(raw, bool):
        raise BadRequest("read option raw must be a boolean.")
    offset = _int_option(options, "offset", 0) or 0
    length = _int_option(options, "length", 1)
    with egress.open(url, accept=ACCEPT) as response:
        final = response.url
        if response.status == 404 or response.status == 410:
            raise NotFound(f"{final} returned HTTP {response.status}: there is no page there.")
        if response.status >= 400:
            raise Upstream(f"{final} returned HTTP {response.status}.")
        header = response.content_type
        ctype = ContentType.parse(header) if header else None
        if ctype is not None and not ctype.is_text:
            size = response.headers.get("content-length")
            return _binary(final, ctype.mime, int(size) if size and size.isdigit() else None)
        body = response.read(page_limit)
    ctype = ctype or sniff(body.data)
    if not ctype.is_text:
        return _binary(final, ctype.mime, len(body.data))
    text, charset = decode(body.data, ctype)
    title = ""
    if ctype.is_html and not raw:
        title, text = html_to_markdown(text, final)
    if offset > len(text):
        raise BadRequest(f"read option offset {offset} is past the end of the page ({len(text)} characters).")
    window, end = page(text, offset, length)
    data: dict[str, Any] = {
        "summary": "",
        "url": final,
        "title": title or None,
        "contentType": ctype.mime,
        "charset": charset,
        "markdown": window,
    }
    what = f'"{title}"' if title else final
    kind = "raw " + ctype.mime if raw else ("markdown" if ctype.is_html else ctype.mime)
    data["summary"] = f"Read {what} ({len(window)} characters of {kind})."
    notices: list[str] = []
    if body.truncated:
        data["downloadTruncated"] = True
        notices.append(f"The page was cut at {page_limit} bytes ([web] max_page_bytes); the rest was not downloaded.")
    if offset or end < len(text):
        data.update({"offset": offset, "totalChars": len(text)})
        if end < len(text):
            data["nextOffset"] = end
            notices.append(
                f"Showing characters {offset}–{end} of {len(text)}. Read again with options {{offset: {end}}} for more."
            )
    if notices:
        data["notice"] = " ".join(notices)
        data["summary"] += " " + " ".join(notices)
    return data


def _binary(url: str, mime: str, size: int | None) -> dict[str, Any]:
    sized = f", {size} bytes" if size is not None else ""
    return {
        "summary": f"{url} is {mime}{sized}; its content is not shown. Download it with "
        f'write ~/memory/<path> {{"options": {{"fromUrl": "{url}"}}}} to work on it.',
        "url": url,
        "title": None,
        "contentType": mime,
        "size": size,
        "markdown": "",
    }
