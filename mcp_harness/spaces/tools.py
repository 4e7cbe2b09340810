"""The `~/tools/` space: the listing, one tool's contract, and authoring a lambda (HARNESS §4, §12).

The listing and the contracts are built in callables/catalog.py; this module routes addresses to them and checks a
lambda written here. The verbs' own contracts come from `ctx.services.verbs`: verbs/contracts.py is built from this
module's SPACE, so importing it here would be a cycle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.callables import catalog
from mcp_harness.callables.documents import LAMBDA_SHAPE, validate_lambda
from mcp_harness.callables.registry import CALLABLES
from mcp_harness.errors import BadRequest
from mcp_harness.spaces.space import ResourceForm, Space, markdown_resource
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

WRITE_OPTIONS = ("delete", "tool")


def read_tools(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    """`~/tools/` lists what the agent can use; `~/tools/<name>` is one contract (options are ignored)."""
    if address.listing:
        listing = catalog.tools_listing(ctx)
        return VerbResult.of(listing, listing["markdown"], fmt=fmt)
    return catalog.read_tool(ctx, address.rest, fmt)


def write_tool(
    ctx: VerbContext, address: Address, content: object, options: dict[str, Any], dry_run: bool
) -> VerbResult:
    """Author, replace or delete a lambda (HARNESS §4, §12)."""
    name = address.rest
    refuse_unknown_options(f"write ~/tools/{name}", options, WRITE_OPTIONS)
    tools = ctx.services.tools
    if options.get("delete") is True:
        existing = tools.get(ctx.agent.id, name)
        if name in CALLABLES or (existing is not None and existing.kind == "builtin"):
            raise BadRequest(f'"{name}" is a builtin tool; disable it via the agent\'s tool grants instead.')
        deleted = tools.delete_lambda(ctx.agent.id, name)
        summary = f"Deleted tool {name}." if deleted else f"No authored tool named {name}; nothing to delete."
        return VerbResult.of({"summary": summary, "name": name, "deleted": deleted})
    if "delete" in options and not isinstance(options["delete"], bool):
        raise BadRequest("write ~/tools option delete must be true (or left out).")
    if "tool" in options:
        body: object = options["tool"]
    elif isinstance(content, str):
        try:
            body = json.loads(content)
        except json.JSONDecodeError as exc:
            raise BadRequest(
                f"write ~/tools/{name} expects JSON content: {LAMBDA_SHAPE} ({exc.msg} at line {exc.lineno})."
            ) from None
    else:
        raise BadRequest(f"write ~/tools/{name} expects JSON content (or options.tool): {LAMBDA_SHAPE}.")
    doc = validate_lambda(name, body, ctx.services.sandbox_runtimes())
    cid = tools.save_lambda(ctx.agent.id, doc)
    summary = f"Saved tool {name} ({cid}). Call it by name with the call verb; its contract is live in ~/tools now."
    return VerbResult.of({"summary": summary, "name": name, "cid": cid, "kind": doc.kind})


def _names_one(address: Address) -> bool:
    return not address.listing


def _may_start_servers(address: Address, options: Mapping[str, Any]) -> bool:
    """The listing and an upstream tool's contract may first list a mounted MCP server's tools (issue 20): the
    call is then logged on its own, so the wait does not hold the database."""
    return address.listing or address.rest.startswith("mcp__")


SPACE = Space(
    name="tools",
    kinds=("tools",),
    read=read_tools,
    network_read=_may_start_servers,
    read_form="~/tools/, ~/tools/<name>",
    read_line="""- `~/tools/`: the verbs and the tools you can call; `~/tools/<name>`: one tool's full contract.""",
    read_details="""## `~/tools/` and `~/tools/<name>` (also `harness://tools/<name>`)
- `~/tools/` lists the five verbs and the callable tools you may use — granted builtins this host offers, and the tools you authored — with one-line summaries: {verbs, tools, markdown}.
- `~/tools/<name>`: a verb's full contract (this text and its schemas), or a callable's: description, input and output schemas, its CID, and for an authored tool its runtime and source. A name you cannot call reads like one that does not exist: you get the listing.
- Reading a callable's contract (or calling it) makes it an MCP tool of its own in this session on session-bound endpoints (see ~/tools/call).""",  # noqa: E501
    write=write_tool,
    write_options=WRITE_OPTIONS,
    writes=_names_one,
    write_form="~/tools/<name> (JSON content, or options {tool} / {delete: true})",
    write_line="""- `~/tools/<name>`: author a tool (lambda) from JSON `content` {description, input?, output?, source, runtime?, summary?}; `source` defines `main(input)` (runtime "python") or a default export (TypeScript), run in the execute sandbox by the call verb. {delete: true} removes it.""",  # noqa: E501
    write_details="""## `~/tools/<name>`
- `content` is a JSON tool document (or pass the object as `options.tool`): {description (required, at most 16 KiB), source (required, at most 256 KiB), runtime?, input?, output?, summary?}; no other fields.
- `runtime`: "python" calls the source's top-level `main(input)` (sync or async) with the system Python; "typescript" (or "ts") calls its default export. Left out, it is python (typescript on a host that runs only TypeScript); any other value is refused. The tool runs in the execute sandbox with your memory at /workspace; its return value is the result.
- `input` and `output` are JSON schemas in a subset — type, properties, required, additionalProperties, enum, minLength, maxLength, minimum, maximum, items, minItems, maxItems, description — with a root of type "object". `call` checks the input against `input` (a mismatch returns the contract with the errors) and the result against `output`.
- Names: 2 to 64 characters of a-z, 0-9, `_` and `-`, starting with a letter; the verbs' and builtins' names are reserved. Writing an existing name replaces it; `options: {delete: true}` removes it (a builtin cannot be deleted: grants decide those).
- Calling one needs its runtime on this host and your `execute` grant. Result: {name, cid, kind}.""",  # noqa: E501
    resources=(
        ResourceForm(
            "tool", "Tool contract", "harness://tools/{name}", "A verb's full contract as markdown.", "text/markdown"
        ),
    ),
    resource_read=markdown_resource(read_tools),
)
