"""The `~/memory/…` space (HARNESS §3, §12). A read gives a file a page at a time, a directory a page of entries at a
time; a write replaces a whole file atomically, deletes, or downloads a URL into the path.

A file page is at most 200 KiB of UTF-8, as a web read's is, picked with `options.offset` / `options.length` in
characters (so a page never splits a character); a listing page is at most `options.limit` entries, continued with
`options.cursor`. Every result carries the totals and, when more remains, says how to get it.

A large page travels once. The MCP front sends a result's `data` as structuredContent and its `text` as the text
block, and the official HTTP client drops a server-sent event over 1 MiB: a 600 KB file sent both ways killed it. So
above `INLINE_BYTES` the content is only in the text block, and `data` says `contentInText: true` (in markdown the
content is the text's first `length` characters). Calls made by the harness's own runs (the model loop, scripts)
keep the content in `data`: that is all they read, and nothing of theirs goes over the wire.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.errors import BadRequest, HarnessError, NotFound
from mcp_harness.memory.entries import MemoryEntry
from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.spaces.space import ResourceBody, ResourceForm, Space
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

MAX_PAGE_BYTES = 200 * 1024
MAX_PAGE_WIRE_BYTES = 2 * MAX_PAGE_BYTES
"""A page's size as a JSON string: control characters (terminal colour codes, say) escape to six bytes each."""
INLINE_BYTES = 16 * 1024
"""Pages up to this size are in both `data` and the text block; larger ones in the text block only."""
FILE_OPTIONS = ("offset", "length")
LISTING_OPTIONS = ("cursor", "limit")
WRITE_OPTIONS = ("delete", "fromUrl", "fromAttachment")
DEFAULT_LISTING_LIMIT = 100
MAX_LISTING_LIMIT = 500

_LISTING_HINT = "offset and length page a file; a listing pages with cursor and limit."
_BACKSLASH_HINT = (
    "A backslash separates directories in an address; a listing shows a name no address can carry (not UTF-8, or "
    "with a control character or a backslash) escaped and marked not addressable. Rename such a file with call "
    "execute, or delete the directory holding it."
)
_UNADDRESSABLE_NOTE = "not addressable: rename it with call execute"


def read_memory(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    memory = ctx.services.memory(ctx.agent)
    path = normalize_memory_path(address.rest, allow_root=True)
    if address.listing or path == "":
        refuse_unknown_options("read ~/memory/<directory>/", options, LISTING_OPTIONS, _LISTING_HINT)
        return _listing(ctx, path, options, fmt)
    refuse_unknown_options("read ~/memory/<path>", options, FILE_OPTIONS + LISTING_OPTIONS)
    file, original = None, None
    try:
        file = memory.read_file(path)
    except HarnessError as error:
        original = error
    if file is None:
        assert original is not None
        # A bare directory name reads as its listing; if it is no directory either, the file error is the honest one.
        try:
            os.close(memory.open_listing(path))
        except HarnessError:
            if isinstance(original, NotFound) and "\\" in address.rest:
                # Likely a name copied from a listing, where unaddressable names are shown escaped.
                raise NotFound(f"{original.message} {_BACKSLASH_HINT}") from None
            raise original from None
        if any(k in options for k in FILE_OPTIONS):
            raise BadRequest(f"{path} is a directory: page its listing with options cursor and limit. {_LISTING_HINT}")
        return _listing(ctx, path, options, fmt)
    if any(k in options for k in LISTING_OPTIONS):
        raise BadRequest(f"{path} is a file: page it with options offset and length (characters). {_LISTING_HINT}")
    entry = file.entry
    data: dict[str, Any] = {"path": entry.path, "size": entry.size, "updatedAt": entry.updated_at}
    if entry.mime_type:
        data["mimeType"] = entry.mime_type
    if file.text is None:
        from mcp_harness.spaces.attachment import memory_image  # a small image is shown as one (issue 18)

        if (image := memory_image(ctx, entry, file.data, data)) is not None:
            return image
        kind = f", {entry.mime_type}" if entry.mime_type else ""
        data = {
            "summary": f"{path} is a binary file ({entry.size} bytes{kind}); content not shown. Process it with a "
            "sandboxed tool or publish it once those are available.",
            **data,
            "encoding": "binary",
        }
        return VerbResult.of(data, fmt=fmt)
    return _file_page(ctx, path, file.text, data, options, fmt)


def _file_page(
    ctx: VerbContext, path: str, text: str, data: dict[str, Any], options: dict[str, Any], fmt: str
) -> VerbResult:
    offset = _int_option(options, "offset", 0) or 0
    length = _int_option(options, "length", 1)
    total = len(text)
    if offset > total:
        raise BadRequest(f"read option offset {offset} is past the end of {path} ({total} characters).")
    window, cut = page_window(text, offset, length)
    end = offset + len(window)
    if offset == 0 and end == total:
        summary = f"Read {path} ({data['size']} bytes)."
    else:
        summary = f"Read characters {offset}–{end} of {path} ({total} characters, {data['size']} bytes)."
    notice = None
    if end < total:
        why = f"; a page holds at most {MAX_PAGE_BYTES // 1024} KiB" if cut else ""
        notice = f"{total - end} more characters{why}: read again with options {{offset: {end}}}."
    data = {"summary": f"{summary} {notice}" if notice else summary, **data, "encoding": "utf8"}
    data.update({"totalChars": total, "offset": offset, "length": len(window)})
    if notice:
        data.update({"nextOffset": end, "notice": notice})
    once = ctx.run_id is None and len(window.encode("utf-8")) > INLINE_BYTES
    shown = {**data, "contentInText": True} if once else {**data, "content": window}
    if fmt == "json":
        return VerbResult(shown, json.dumps({**data, "content": window}, indent=2, ensure_ascii=False))
    return VerbResult(shown, window if notice is None else f"{window}\n\n[{notice}]")


def page_window(text: str, offset: int, length: int | None) -> tuple[str, bool]:
    """The page of `text` from `offset`: at most `length` characters, MAX_PAGE_BYTES of UTF-8 and MAX_PAGE_WIRE_BYTES
    as a JSON string, cut on a character boundary. Returns it and whether a byte bound (not `length`) cut it."""
    # A character is at least one byte, so the byte bound never keeps more than MAX_PAGE_BYTES characters.
    want = MAX_PAGE_BYTES if length is None else min(length, MAX_PAGE_BYTES)
    window = text[offset : offset + want]
    encoded = window.encode("utf-8")
    if len(encoded) > MAX_PAGE_BYTES:
        window = encoded[:MAX_PAGE_BYTES].decode("utf-8", errors="ignore")
    if len(encoded) * 6 > MAX_PAGE_WIRE_BYTES:  # only then can escaping push it over
        wire = len(json.dumps(window, ensure_ascii=False).encode("utf-8"))
        while wire > MAX_PAGE_WIRE_BYTES:
            window = window[: max(1, len(window) * MAX_PAGE_WIRE_BYTES // wire)]
            wire = len(json.dumps(window, ensure_ascii=False).encode("utf-8"))
    full = len(text) - offset if length is None else min(length, len(text) - offset)
    return window, len(window) < full


def _int_option(options: dict[str, Any], key: str, minimum: int, maximum: int | None = None) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (maximum and value > maximum):
        bound = f"from {minimum} to {maximum}" if maximum else f">= {minimum}"
        raise BadRequest(f"read option {key} must be an integer {bound} (got {json.dumps(value)}).")
    return value


def _cursor(path: str, cursor: object) -> str:
    """The entry path an earlier page ended at, checked to be one of this directory's."""
    prefix = f"{path}/" if path else ""
    name = cursor[len(prefix) :] if isinstance(cursor, str) and cursor.startswith(prefix) else ""
    if not name or "/" in name:
        example = json.dumps(f"{prefix}notes.md")
        raise BadRequest(
            f"read option cursor must be the nextCursor of an earlier page of this listing: the path of an entry "
            f"of {prefix or 'the memory root'}, like {example} (got {json.dumps(cursor)})."
        )
    return name


def _listing(ctx: VerbContext, path: str, options: dict[str, Any], fmt: str) -> VerbResult:
    limit = _int_option(options, "limit", 1, MAX_LISTING_LIMIT) or DEFAULT_LISTING_LIMIT
    given = options.get("cursor")
    after = _cursor(path, given) if given is not None else None
    page = ctx.services.memory(ctx.agent).page_dir(path, after, limit)
    files, dirs, shown = page.file_count, page.dir_count, len(page.entries)
    where = f"{path}/" if path else "Memory root"
    if page.complete and not page.entries:
        summary = f"{where} is empty."
    elif page.complete:
        summary = f"{where} holds {files} file{'s' if files != 1 else ''} ({page.page_bytes} bytes)"
        if dirs:
            noun = "directory" if dirs == 1 else "directories"
            summary += f" and {dirs} {noun} (read a directory address to see inside)"
        summary += "."
    else:
        counts = f"{files} file{'s' if files != 1 else ''} and {dirs} {'directory' if dirs == 1 else 'directories'}"
        listed = f"entries {page.start + 1}–{page.start + shown} are listed here" if shown else "none are left here"
        summary = f"{where} holds {counts}; {listed}."
        if page.next_after is not None:
            summary += f" {page.remaining} more: read again with options {{cursor: {json.dumps(page.next_after)}}}."
    if bad := page.unaddressable:
        summary += (
            f" {bad} name{'s' if bad != 1 else ''} cannot be addressed (not UTF-8, or with a control character "
            "or a backslash) and " + ("is" if bad == 1 else "are") + " shown escaped: rename with call execute."
        )
    data: dict[str, Any] = {
        "summary": summary,
        "path": path,
        "entries": [e.to_json() for e in page.entries],
        "totalEntries": page.total_entries,
    }
    if page.complete:
        data["totalBytes"] = page.page_bytes
    else:
        data["pageBytes"] = page.page_bytes
    if page.next_after is not None:
        data.update({"nextCursor": page.next_after, "remaining": page.remaining})
    lines = [_line(e) for e in page.entries]
    return VerbResult.of(data, "\n".join(lines) or None, fmt=fmt)


def _line(e: MemoryEntry) -> str:
    if e.type == "dir":
        n = e.entry_count or 0
        text = f"- {e.path}/ ({'≥ ' if e.entry_count_capped else ''}{n} entr{'y' if n == 1 else 'ies'}"
    else:
        text = f"- {e.path} ({e.size} bytes"
    return text + ("" if e.addressable else f"; {_UNADDRESSABLE_NOTE}") + ")"


def write_memory(
    ctx: VerbContext, address: Address, content: object, options: dict[str, Any], dry_run: bool
) -> VerbResult:
    """Replace a whole file atomically, delete a file or tree, or download a URL into the path (HARNESS §12)."""
    refuse_unknown_options("write ~/memory", options, WRITE_OPTIONS)
    if "fromUrl" in options:
        if content is not None or len(options) > 1:
            raise BadRequest("write ~/memory with fromUrl takes no content and no other option.")
        # Imported here: the guarded HTTP client is loaded by the first download, not by every write.
        from mcp_harness.web.download import download_to_memory

        return VerbResult.of(download_to_memory(ctx.services, ctx.agent, address.rest, options["fromUrl"]))
    if "fromAttachment" in options:
        from mcp_harness.spaces.attachment import save_to_memory

        return save_to_memory(ctx, address.rest, content, options)
    path = normalize_memory_path(address.rest)
    memory = ctx.services.memory(ctx.agent)
    if "delete" in options:
        if not isinstance(options["delete"], bool):
            raise BadRequest("write ~/memory option delete must be true (or left out).")
        if options["delete"]:
            deleted = memory.delete(path)
            summary = f"Deleted {path}." if deleted else f"Nothing existed at {path}."
            return VerbResult.of({"summary": summary, "path": path, "deleted": deleted})
    if not isinstance(content, str):
        raise BadRequest(
            "write to ~/memory requires content (or options.delete / options.fromUrl / options.fromAttachment)."
        )
    try:
        data_bytes = content.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest("content is not valid Unicode text (it holds a lone surrogate); send valid UTF-8.") from None
    entry = memory.write_file(path, data_bytes)
    data = {"summary": f"Wrote {path} ({entry.size} bytes).", **entry.to_json()}
    return VerbResult.of(data)


def _downloads(address: Address, options: Mapping[str, Any]) -> bool:
    # A copy from an attachment (up to 100 MiB) is logged on its own too, so it never holds the database.
    return "fromUrl" in options or "fromAttachment" in options


def memory_resource(ctx: VerbContext, address: Address) -> ResourceBody:
    """A file as itself (text, or a blob when binary); a directory as its first listing page in JSON."""
    if address.listing:
        listing = read_memory(ctx, address, {}, "json")
        return ResourceBody("application/json", json.dumps(listing.data, indent=2))
    file = ctx.services.memory(ctx.agent).read_file(normalize_memory_path(address.rest))
    if file.text is None:
        return ResourceBody(file.entry.mime_type, blob=file.data)
    return ResourceBody(file.entry.mime_type or "text/plain", file.text)


# The contract text is prose the model reads, one paragraph a line (as in verbs/contracts.py).
MEMORY_PATH_RULES = (
    "Paths: `\\` counts as `/`, and empty and `.` segments are dropped. Refused: a NUL or other control character, "
    "`..`, more than 16 segments, more than 512 bytes in all or 255 in one name, and names starting "
    "`.mcp-harness-tmp-` (the harness's own temp files). Symlinks are never followed: a path through one reads as "
    "not found and is refused for writing."
)

SPACE = Space(
    name="memory",
    kinds=("memory",),
    read=read_memory,
    read_options=FILE_OPTIONS + LISTING_OPTIONS,
    read_form="~/memory/<path>",
    read_line="""- `~/memory/<path>`: a file of your persistent memory ({content}; options offset, length); a directory (`~/memory/`, or a path ending in `/`) lists one level ({entries}; options cursor, limit).""",  # noqa: E501
    read_details=f"""## `~/memory/<path>` (also `harness://memory/<path>`)
- A file: the text result is the file itself; the structured result is {{path, size, updatedAt, mimeType?, encoding: "utf8", content, totalChars, offset, length}}. A page holds at most 200 KiB of UTF-8: `options.offset` (an integer ≥ 0) and `options.length` (an integer ≥ 1) pick a window, in characters; when more remains, the result says so and gives `nextOffset`. Over MCP a page over 16 KiB travels once, in the text block only (`contentInText: true` in the structured result). A binary file (a NUL byte, or not UTF-8) gives its metadata with `encoding: "binary"` and no content; work on it with `call execute`. A PNG, JPEG, GIF or WebP image of at most 4,500,000 bytes is shown as an image instead, when your model accepts images (`shownAsImage: true`).
- A directory — `~/memory/`, a path ending in `/`, or the bare name of a directory — lists one level in path order, a page of at most `options.limit` entries (1 to 500, default 100): {{path, entries: [{{path, type: "file" | "dir", size, updatedAt, mimeType?, entryCount?}}], totalEntries, totalBytes (or pageBytes for a partial page), nextCursor?, remaining?}}; pass `options.cursor` (the `nextCursor`) for the next page. Symlinks and special files are not listed. A name no address can carry (not UTF-8, a control character, a backslash) is listed escaped, with `addressable: false`.
- File options on a directory, listing options on a file, and any other option keys are refused.
- {MEMORY_PATH_RULES}""",  # noqa: E501
    write=write_memory,
    write_options=WRITE_OPTIONS,
    network_write=_downloads,
    write_form="~/memory/<path> (with content, or options {delete: true} / {fromUrl} / {fromAttachment})",
    write_line="""- `~/memory/<path>`: replace the whole file with `content`, atomically (parent folders are created; there is no append). options {delete: true} removes a file or directory; {fromUrl: "<url>"} downloads the URL into the path instead; {fromAttachment: "<id>"} saves an attachment of this conversation there (`~/memory/` puts it at attachments/<name>).""",  # noqa: E501
    write_details=f"""## `~/memory/<path>`
- `content` (a string, stored as UTF-8) replaces the whole file: it is written to a temp file, synced and renamed into place, so a reader sees the old file or the new one, never a mix. Parent folders are created. There is no append: read, change, write back. Writing onto a directory is refused. Result: {{path, type, size, updatedAt, mimeType?}}.
- `options: {{delete: true}}` removes a file or a whole directory tree (`deleted: false` when nothing was there); `delete` must be a boolean.
- `options: {{fromUrl: "<http:// or https:// URL>"}}` downloads the URL into memory instead of `content` (it takes no content and no other option), through the same guarded client as `read https://…`, and stores it atomically. An address naming a directory (a path ending in `/`, or `~/memory/`, which stores under `downloads/`) takes the URL's last path segment as the file name; a name without an extension gets one from the content type. A body over `[web] max_download_bytes` (default 50 MiB) is refused, and so is an HTTP error status. Result: {{path, size, mimeType, finalUrl, contentType}}.
- `options: {{fromAttachment: "<64-hex id>"}}` copies an attachment of this conversation (`read attachment:<id>`) into memory, atomically (no content, no other option); an address naming a directory (`~/memory/`, which stores under `attachments/`, or a path ending in `/`) takes the attachment's name. Result: {{id, path, size, mimeType}}.
- {MEMORY_PATH_RULES}
- Other option keys are refused by name.""",  # noqa: E501
    resources=(
        ResourceForm(
            "memory",
            "Memory file",
            "harness://memory/{path}",
            "A file (or, with a trailing slash, a directory listing) in the agent's memory.",
        ),
    ),
    resource_read=memory_resource,
)
