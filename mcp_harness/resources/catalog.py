"""Resource listing, templates and reads, mapped onto the address spaces the `read` verb uses (spaces/registry.py).

Resource reads are the client application looking, not the agent acting, so they are not logged as verb calls.
"""

from __future__ import annotations

import base64
import re
from functools import cache

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from mcp_harness import cursors
from mcp_harness.addresses import Address, parse_address, thread_uri, tool_uri
from mcp_harness.addresses import memory_uri as memory_resource_uri
from mcp_harness.binding import SessionBinding
from mcp_harness.errors import HarnessError
from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.spaces.registry import read_space, resource_forms
from mcp_harness.spaces.space import ResourceForm
from mcp_harness.verbs.contracts import VERBS

RESOURCE_NOT_FOUND = -32002
"""What a missing resource answers in the handshake era (2025-11-25 and before: "Resource not found: -32002")."""
PAGE_SIZE = 1000
"""Resources a page holds at most. The spec leaves the size to the server (clients must not assume one), and most
servers send every resource in one page, so clients take large pages; at 100 a page, 100k files cost 1,000 round
trips, each with its fixed cost (a request, a thread hop, the SDK's envelope), twice what the listing itself cost."""
PAGE_BYTES = 256 * 1024
"""What one page's memory paths may add up to (plus `walk.PATH_OVERHEAD` each), so a page of long names stays a few
hundred KiB on the wire."""
CURSOR_PREFIX = "after:"
_CURSOR = re.compile(r"after:([A-Za-z0-9_-]+)")
"""A cursor names the last memory file of the page before, `after:` + its path in unpadded base64url: the walk of
the tree resumes just after that path (memory/walk.py), so a page costs what it lists, not a walk of the tree."""


def _fields(form: ResourceForm, uri_key: str) -> dict[str, str]:
    """A form as MCP fields, only those it sets (an unset field stays unset on the wire)."""
    fields = {"name": form.name, "title": form.title, uri_key: form.uri}
    fields |= {"description": form.description, "mimeType": form.mime_type}
    return {key: value for key, value in fields.items() if value is not None}


RESOURCE_TEMPLATES = [
    types.ResourceTemplate.model_validate(_fields(f, "uriTemplate")) for f in resource_forms() if f.template
]
KNOWN_RESOURCES = ", ".join(f.uri for f in sorted(resource_forms(), key=lambda f: not f.uri.startswith("harness://")))
"""What an unknown resource's error names: the harness:// resources first, then the other schemes."""


def _static(binding: SessionBinding) -> list[types.Resource]:
    out = [types.Resource.model_validate(_fields(f, "uri")) for f in resource_forms() if not f.template]
    out += [
        types.Resource(name=f"tool:{name}", title=f"{name} contract", uri=tool_uri(name), mime_type="text/markdown")
        for name in VERBS
    ]
    if binding.session_id is not None:
        out.append(
            types.Resource(
                name="thread",
                title="This session's transcript",
                uri=thread_uri(binding.session_id),
                mime_type="text/markdown",
            )
        )
    from mcp_harness.server import apps  # on use: the server package imports this module

    out.append(apps.view_resource())  # MCP Apps' ui:// view of a run tree and the plan
    return out


def not_found_code(protocol_version: str | None) -> int:
    """The error code for a resource that does not exist, by the request's protocol era.

    2026-07-28 says servers MUST answer -32602 (Invalid Params) with `data.uri` (clients still accept -32002);
    2025-11-25 and earlier say -32002. An unknown era (no version passed) gets the current rule.
    """
    if protocol_version is None or protocol_version in MODERN_PROTOCOL_VERSIONS:
        return types.INVALID_PARAMS
    return RESOURCE_NOT_FOUND


def encode_cursor(path: str) -> str:
    return CURSOR_PREFIX + cursors.encode(path)


def decode_cursor(cursor: str | None) -> str | None:
    """The memory path a cursor resumes after (None for the first page); -32602 for anything this server would not
    have written."""
    if not cursor:
        return None
    match = _CURSOR.fullmatch(cursor)
    path = None
    if match:
        path = cursors.decode(match.group(1))
        try:
            # Only a normalized path: no path tricks in a cursor.
            if path is not None and normalize_memory_path(path) != path:
                path = None
        except HarnessError:
            path = None
    if path is None:
        raise MCPError(
            types.INVALID_PARAMS,
            f"Invalid cursor {cursor!r}: pass back the nextCursor of an earlier resources/list page "
            "(an opaque after:… token), or no cursor for the first page.",
            {"cursor": cursor},
        )
    return path


_MEMORY_URI = memory_resource_uri("")
_UNQUOTED = re.compile(r"[A-Za-z0-9_.~/-]*")
"""Paths `memory_uri` leaves as they are (what `urllib.parse.quote` never escapes, and "/"): most of them, and one
regex match costs a fifth of quoting."""


@cache
def _resources() -> TypeAdapter[list[types.Resource]]:
    return TypeAdapter(list[types.Resource])


def _memory_uri(path: str) -> str:
    return _MEMORY_URI + path if _UNQUOTED.fullmatch(path) else memory_resource_uri(path)


def list_resources_sync(binding: SessionBinding, cursor: str | None) -> types.ListResourcesResult:
    """The fixed resources first, then memory files in path order, up to `PAGE_SIZE` (and `PAGE_BYTES`) a page.

    Only files an address can name are listed: every resource offered must be readable by resources/read.
    """
    after = decode_cursor(cursor)
    ctx = binding.context_sync(create=False)
    items = _static(binding) if after is None else []
    store = ctx.services.memory(ctx.agent)
    files, last = store.files_page(after, max(1, PAGE_SIZE - len(items)), PAGE_BYTES)
    # One validation of the page's list (pydantic's core loops over it) instead of a model built per file: a
    # quarter less per page of 1,000 (and `model_construct`, in Python, is four times slower than either).
    page = [{"name": p, "uri": _memory_uri(p), "mimeType": m, "size": s} for p, s, m in files]
    items += _resources().validate_python(page)
    return types.ListResourcesResult(resources=items, next_cursor=encode_cursor(last) if last is not None else None)


def read_resource_sync(
    binding: SessionBinding, uri: str, protocol_version: str | None = None
) -> types.ReadResourceResult:
    """One resource's contents; a missing one is the era's not-found error (`not_found_code`) with `data.uri`."""
    from mcp_harness.server import apps

    if uri == apps.VIEW_URI:
        return apps.read_view()
    if uri.endswith(JSON_QUERY) and (plain := parse_address(uri.removesuffix(JSON_QUERY))) and plain.kind in JSON_KINDS:
        return _read_json(binding, plain, uri, protocol_version)
    address = parse_address(uri)
    space = read_space(address.kind) if address is not None else None
    if address is None or space is None or space.resource_read is None or not space.reads(address):
        raise MCPError(
            not_found_code(protocol_version), f"Unknown resource {uri}. Resources: {KNOWN_RESOURCES}.", {"uri": uri}
        )
    try:
        ctx = binding.context_sync(create=False)
        body = space.resource_read(ctx, address)
    except HarnessError as exc:
        code = not_found_code(protocol_version) if exc.status == 404 else types.INVALID_PARAMS
        raise MCPError(code, exc.message, {"uri": uri}) from None
    if body.blob is not None:
        blob = base64.b64encode(body.blob).decode("ascii")
        return types.ReadResourceResult(
            contents=[types.BlobResourceContents(uri=uri, mime_type=body.mime_type, blob=blob)]
        )
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=body.mime_type, text=body.text or "")]
    )


JSON_QUERY = "?format=json"
JSON_KINDS = ("run", "plan")
"""What `<uri>?format=json` reads as the structured form (`application/json`, what `read` answers with `format:
"json"`): the MCP Apps view follows a run tree and the plan through its host's resources/read this way, unlogged.
Only these kinds: neither a run id nor `harness://plan` holds a `?`; any other URI is read as it always was."""


def _read_json(
    binding: SessionBinding, address: Address, uri: str, protocol_version: str | None
) -> types.ReadResourceResult:
    import json

    space = read_space(address.kind)
    if space is None or space.read is None or not space.reads(address):
        raise MCPError(
            not_found_code(protocol_version),
            f"Unknown resource {uri}. {JSON_QUERY} reads the structured form of run:<id> and harness://plan.",
            {"uri": uri},
        )
    try:
        result = space.read(binding.context_sync(create=False), address, {}, "json")
    except HarnessError as exc:
        code = not_found_code(protocol_version) if exc.status == 404 else types.INVALID_PARAMS
        raise MCPError(code, exc.message, {"uri": uri}) from None
    text = json.dumps(result.data, ensure_ascii=False, default=str)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
    )


async def list_resources(binding: SessionBinding, cursor: str | None) -> types.ListResourcesResult:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(list_resources_sync, binding, cursor)


async def read_resource(
    binding: SessionBinding, uri: str, protocol_version: str | None = None
) -> types.ReadResourceResult:
    """`protocol_version` (the request's `ctx.protocol_version`) picks the era's not-found code."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(read_resource_sync, binding, uri, protocol_version)
