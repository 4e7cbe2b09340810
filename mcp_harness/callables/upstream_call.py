"""`call` of an upstream tool (issue 20 point 3): find its document, check the input, forward, render the answer.

The upstream's content blocks and structured content go back to our client unchanged (`VerbResult.content` and
`data`); its `isError` stays an error. What the transcript keeps and a model sees is a text rendering of the blocks,
bounded as every tool result is (HARNESS §12): pictures and other binary content are named, never inlined.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from mcp_harness.callables.documents import contract_markdown
from mcp_harness.callables.upstream import UpstreamResult, split_name
from mcp_harness.schema_check import Check, compile_check
from mcp_harness.verbs.base import VerbContext, VerbResult, touch_expand

if TYPE_CHECKING:
    from mcp_harness.store.tools import ToolRecord

logger = logging.getLogger(__name__)

MAX_LOGGED_TEXT = 256 * 1024
"""The durable cap on an upstream result's text (MAX_TOOL_RESULT_BYTES); a model sees at most 8 KiB of it."""


def find_tool(ctx: VerbContext, name: str) -> ToolRecord | None:
    """The document of `name` if the agent may call it: a mounted server's tool the agent is granted. Blocking.

    What `catalog.upstream_documents` answers for this one name, without decoding and grant-checking the whole
    catalog on every call: the grant first (no database), then that server's documents only."""
    from mcp_harness.grants import upstream_granted

    parts = split_name(name)
    if parts is None or not upstream_granted(ctx.agent.definition, name):
        return None
    host = ctx.services
    if parts[0] not in host.mcp_servers():
        return None
    return host.upstream_store.tool(parts[0], name)


@dataclass(frozen=True, slots=True)
class Prepared:
    """`find_tool`'s answer for one call, looked up in the hop that logged it (`VerbContext.prepared`)."""

    call_id: str | None
    name: str
    record: ToolRecord | None


def prepare(ctx: VerbContext, name: str) -> Prepared:
    """Blocking."""
    return Prepared(ctx.call_id, name, find_tool(ctx, name))


async def call_upstream(ctx: VerbContext, name: str, tool_input: dict[str, Any]) -> VerbResult | None:
    """Run upstream tool `name`, or None when the agent has no such tool (the caller answers with the listing)."""
    parts = split_name(name)
    if parts is None:
        return None
    server, tool = parts
    services = ctx.services
    ready = ctx.prepared
    if isinstance(ready, Prepared) and ready.name == name and ready.call_id == ctx.call_id:
        record = ready.record
    else:
        record = await anyio.to_thread.run_sync(find_tool, ctx, name)
    if record is None:
        from mcp_harness.grants import upstream_granted

        mounted = await anyio.to_thread.run_sync(services.mcp_servers)
        if server not in mounted or not upstream_granted(ctx.agent.definition, name):
            return None
        if await anyio.to_thread.run_sync(services.upstream_store.has_tools, server):
            return None  # listed, and this is not one of its tools
        await services.upstreams.refresh(server)  # never listed yet: its tools are learned now
        record = await anyio.to_thread.run_sync(find_tool, ctx, name)
        if record is None:
            return None
    errors = input_errors(record.document.input, tool_input, record.cid)
    if errors:
        return touch_expand(name, contract_markdown(record.document, record.cid), errors)
    logger.info("upstream call: actor=%s agent=%s server=%s tool=%s", ctx.actor, ctx.agent.id, server, tool)
    report = ctx.progress

    async def progress(done: float, total: float | None, message: str | None) -> None:
        if report is not None:
            count = f"{done:g}/{total:g}" if total else f"{done:g}"
            await report(f"{server}: {count}" + (f" {message}" if message else ""))

    result = await services.upstreams.call_tool(server, tool, tool_input, progress if report else None)
    return render(server, tool, name, result)


@cache
def _compiled(schema_json: str) -> tuple[Check, Any]:
    """The fast "certainly valid" test and the jsonschema validator behind it, built once per schema."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    schema = json.loads(schema_json)
    cls = validator_for(schema, default=Draft202012Validator)
    return compile_check(schema), cls(schema)


_BY_CID: dict[str, tuple[Check, Any]] = {}
"""Compiled schemas by the CID of the document whose input schema they check: a CID names its contract exactly, so
the schema is not re-serialized on every call to find them."""


def input_errors(schema: dict[str, Any], value: dict[str, Any], cid: str | None = None) -> list[str]:
    """`$.path: message` for each way `value` breaks the upstream's own schema (full JSON Schema, not our subset).
    A schema jsonschema cannot use is left to the upstream to enforce. `cid`: the document's, when known."""
    try:
        compiled = _BY_CID.get(cid) if cid is not None else None
        if compiled is None:
            compiled = _compiled(json.dumps(schema, sort_keys=True))
            if cid is not None and len(_BY_CID) < 4096:  # bounded: each entry is a compiled schema
                _BY_CID[cid] = compiled
        check, validator = compiled
        if check(value):
            return []
        found = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    except Exception:  # a malformed upstream schema: the upstream decides
        return []
    out = []
    for error in found[:20]:
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        out.append(f"{path}: {error.message}")
    return out


def render(server: str, tool: str, name: str, result: UpstreamResult) -> VerbResult:
    """The answer: blocks and structured content as the upstream sent them; text and a log entry bounded."""
    from mcp_harness.runs.replay import bound

    text = block_text(result.content, result.structured)
    if result.is_error:
        text = f"MCP server {server} reported an error from {tool}:\n\n{text}"
    logged_text = text.encode("utf-8")[:MAX_LOGGED_TEXT].decode("utf-8", errors="ignore")
    summary = f"{'Error from' if result.is_error else 'Result of'} {name}."
    logged: dict[str, Any] = {
        "summary": summary,
        "server": server,
        "tool": tool,
        "isError": result.is_error,
        "text": logged_text,
    }
    if result.structured is not None:
        size = len(json.dumps(result.structured, ensure_ascii=False, default=str).encode("utf-8"))
        # The log keeps it like any result, up to the durable cap; past it, what it was (the client got it whole).
        logged["structuredContent"] = result.structured if size <= MAX_LOGGED_TEXT else {"omittedBytes": size}
    return VerbResult(
        result.structured if result.structured is not None else {},
        bound(text),
        logged=logged,
        meta=result.meta,
        content=result.content,
        is_error=result.is_error,
    )


def block_text(blocks: tuple[dict[str, Any], ...], structured: dict[str, Any] | None) -> str:
    """Content blocks as text: text as it is, everything binary as a one-line note naming what it was."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(block.get("data", ""))) * 3 // 4
            parts.append(f"[{kind} {block.get('mimeType', '')}, about {size} bytes]")
        elif kind == "resource":
            res = block.get("resource") or {}
            head = f"[resource {res.get('uri', '')}" + (f" ({res['mimeType']})" if res.get("mimeType") else "") + "]"
            parts.append(f"{head}\n{res['text']}" if "text" in res else f"{head} (binary)")
        elif kind == "resource_link":
            parts.append(f"[link {block.get('name', '')}: {block.get('uri', '')}]")
        else:
            parts.append(f"[{kind} content]")
    if not any(b.get("type") == "text" for b in blocks) and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    return "\n\n".join(parts) or "(no content)"
