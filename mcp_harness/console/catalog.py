"""The Agents, agent, tools and memory pages' data. Definitions, grants, providers and identities are shown as
names and sources, never a secret: providers say where a key would come from, identities give account ids.

What the stores do not answer themselves (grants, providers, identities) comes through `Directory`, which the
composition root satisfies.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp_harness.console.triggers import HasTriggers
from mcp_harness.definition import AgentDefinition
from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.scope import Scope
from mcp_harness.services import Memories, Stores
from mcp_harness.store.agents import AgentRecord

TEXT_PREVIEW_BYTES = 256 * 1024
"""A memory file larger than this is offered for download only."""


class Directory(HasTriggers, Memories, Protocol):
    """The stores plus what an agent page shows beside them (all blocking, called off the loop)."""

    def grants(self, definition: AgentDefinition) -> dict[str, Any]: ...
    def provider_rows(self) -> list[dict[str, Any]]: ...
    def identity_rows(self, definition: AgentDefinition) -> list[dict[str, Any]]: ...


def agent_of(stores: Stores, scope: Scope, name_or_id: str) -> AgentRecord:
    """The agent if the caller may see it; missing and someone else's read the same.

    Raises:
        NotFound: no such agent, or one the caller may not see.
    """
    found = stores.agents.find(scope.account_id, name_or_id)
    if found is None or not scope.may_act_as(found):
        raise NotFound(f"No agent {name_or_id!r}. The Agents page lists the ones you can see.")
    return found


def agent_list(stores: Stores, scope: Scope) -> dict[str, Any]:
    agents = [a for a in stores.agents.list(scope.account_id) if scope.may_act_as(a)]
    return {
        "agents": [
            {
                "id": a.id,
                "name": a.definition.name,
                "provider": a.definition.model_provider,
                "model": a.definition.model,
                "sessions": stores.agents.count_sessions(a.id),
                "updatedAt": a.updated_at,
            }
            for a in agents
        ]
    }


def agent_view(directory: Directory, scope: Scope, name_or_id: str) -> dict[str, Any]:
    """One agent: definition, grants, its provider (and the others it may name), identities, tools."""
    agent = agent_of(directory, scope, name_or_id)
    definition = agent.definition
    return {
        "agent": {"id": agent.id, "name": definition.name, "status": agent.status, "updatedAt": agent.updated_at},
        "definition": definition.to_json(),
        "grants": directory.grants(definition),
        "providers": directory.provider_rows(),
        "identities": directory.identity_rows(definition),
        "tools": tool_rows(directory, agent),
    }


def tool_rows(stores: Stores, agent: AgentRecord) -> list[dict[str, Any]]:
    """The agent's tools: name, kind, summary, CID, enabled, the contract, and an authored tool's source."""
    rows = []
    for tool in stores.tools.list(agent.id):
        doc = tool.document
        row: dict[str, Any] = {
            "name": doc.name,
            "kind": doc.kind,
            "summary": doc.summary,
            "cid": tool.cid,
            "enabled": tool.enabled,
            "input": doc.input,
            "updatedAt": tool.updated_at,
        }
        if doc.output is not None:
            row["output"] = doc.output
        if doc.source is not None:
            row["source"] = doc.source
            row["runtime"] = doc.runtime
        rows.append(row)
    return rows


def _clean(path: str) -> str:
    cleaned = path.strip().strip("/")
    if any(part in ("", ".", "..") for part in cleaned.split("/")) and cleaned:
        raise BadRequest(f"Memory path {path!r} is not a plain relative path (no empty, . or .. parts).")
    return cleaned


def memory_view(directory: Directory, scope: Scope, name_or_id: str, path: str = "") -> dict[str, Any]:
    """A directory listing, or a file with its text when it is text and small enough to show.

    Raises:
        NotFound: the agent or the path is not there.
        BadRequest: the path is not a plain relative path.
    """
    agent = agent_of(directory, scope, name_or_id)
    memory = directory.memory(agent)
    where = _clean(path)
    data: dict[str, Any] = {"agent": {"id": agent.id, "name": agent.definition.name}, "path": where}
    if where == "" or _is_dir(memory, where):
        listing = memory.list_dir(where)
        data["entries"] = [
            {"path": x.path, "type": x.type, "size": x.size, "updatedAt": x.updated_at} for x in listing.entries
        ]
        data["totalBytes"] = listing.total_bytes
        return data
    file = memory.read_file(where)
    data["file"] = {"path": file.entry.path, "size": file.entry.size, "mimeType": file.entry.mime_type}
    if file.text is not None and len(file.data) <= TEXT_PREVIEW_BYTES:
        data["file"]["text"] = file.text
    return data


def memory_bytes(directory: Directory, scope: Scope, name_or_id: str, path: str) -> tuple[str, bytes]:
    """A memory file's name and bytes, for download."""
    agent = agent_of(directory, scope, name_or_id)
    file = directory.memory(agent).read_file(_clean(path))
    return file.entry.path.rsplit("/", 1)[-1], file.data


def _is_dir(memory: Any, path: str) -> bool:
    try:
        memory.list_dir(path)
    except (NotFound, BadRequest):
        return False
    return True


__all__ = ["Directory", "agent_list", "agent_of", "agent_view", "memory_bytes", "memory_view", "tool_rows"]
