"""The `mcp://<server>/<uri>` space: resources of the MCP servers mounted behind `call` (issue 20 point 3).

`mcp://<server>/` lists the server's resources; `mcp://<server>/<uri>` reads one, the URI as the server spells it
(`mcp://fs/file:///notes/a.md`). A server the agent holds no grant on reads as one that is not mounted. Reads run on
a worker thread (like every read); the upstream call itself runs on the event loop, where the connections live.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.callables.upstream import on_loop
from mcp_harness.errors import NotFound
from mcp_harness.spaces.space import Space
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

MAX_TEXT_BYTES = 256 * 1024
"""A resource's text is cut here, like every durable tool result (HARNESS §12)."""


def read_mcp(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    from mcp_harness.grants import server_granted

    refuse_unknown_options(f"read {address.raw}", options, ())
    server, _, uri = address.rest.partition("/")
    services = ctx.services
    mounted = services.mcp_servers()
    if server not in mounted or not server_granted(ctx.agent.definition, server):
        visible = [n for n in mounted if server_granted(ctx.agent.definition, n)]
        names = ", ".join(f"mcp://{n}/" for n in visible) or "none"
        raise NotFound(f"No MCP server named {server!r} is mounted for you. Yours: {names}.")
    if address.listing:
        resources = on_loop(services.upstreams.list_resources, server)
        lines = [
            f"- {r.get('name', '')} — mcp://{server}/{r.get('uri', '')}"
            + (f" ({r['mimeType']})" if r.get("mimeType") else "")
            + (f": {r['description']}" if r.get("description") else "")
            for r in resources
        ]
        count = len(resources)
        data = {
            "summary": f"MCP server {server} has {count} resource{'s' if count != 1 else ''}.",
            "server": server,
            "resources": resources,
        }
        return VerbResult.of(data, "\n".join(lines) or None, fmt=fmt)
    contents = on_loop(services.upstreams.read_resource, server, uri)
    shown: list[dict[str, Any]] = []
    texts: list[str] = []
    budget = MAX_TEXT_BYTES
    for item in contents:
        entry = {k: v for k, v in item.items() if k != "blob"}
        if "text" in item:
            text = str(item["text"])
            data_bytes = text.encode("utf-8")
            if len(data_bytes) > budget:
                text = data_bytes[:budget].decode("utf-8", errors="ignore") + "\n[truncated]"
                entry["truncated"] = True
            budget = max(0, budget - len(data_bytes))
            entry["text"] = text
            texts.append(text)
        elif "blob" in item:
            entry["bytes"] = len(str(item["blob"])) * 3 // 4
            texts.append(f"[binary {item.get('mimeType', '')}, about {entry['bytes']} bytes]")
        shown.append(entry)
    data = {"summary": f"Resource {uri} of MCP server {server}.", "server": server, "uri": uri, "contents": shown}
    return VerbResult.of(data, "\n\n".join(texts) or None, fmt=fmt)


def _fetches(address: Address, options: Mapping[str, Any]) -> bool:
    return True


SPACE = Space(
    name="mcp",
    kinds=("mcp",),
    read=read_mcp,
    read_options=(),
    network_read=_fetches,
    read_form="mcp://<server>/<uri>",
    read_line="""- `mcp://<server>/<uri>`: a resource of a mounted MCP server; `mcp://<server>/` lists them.""",
    read_details="""## `mcp://<server>/` and `mcp://<server>/<uri>`
- Other MCP servers the owner mounted (`mcp-harness mcp add`) serve their tools through `call` as `mcp__<server>__<tool>` (listed in ~/tools/ under their server) and their resources here.
- `mcp://<server>/` lists the server's resources: {server, resources: [{name, uri, mimeType?, description?}]}. `mcp://<server>/<uri>` reads one, the URI exactly as listed (e.g. `mcp://fs/file:///notes/a.md`): {server, uri, contents: [{uri, mimeType?, text? | bytes?}]}; text over 256 KiB is cut. No options.
- A server you hold no grant on reads as not mounted. Failures name the server: not running, timed out, or a protocol error.""",  # noqa: E501
)
