"""`completion/complete` for the resource templates' parameters, seen through the caller's scope like a read.

What each template completes: `harness://memory/{path}` the agent's memory files, `harness://tools/{name}` the
verbs and the agent's callables, `harness://triggers/{name}` the agent's triggers, `thread:{id}` and `run:{id}` the
sessions and runs the caller may see (a token scoped to an agent: only that agent's, `scope.py`), and
`hm://{account}/{path}` the accounts and live document paths the embedded Hypermedia node holds (public data).
Values are those starting with what was typed, at most `MAX_VALUES` (the spec's cap), newest first for ids.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_harness.scope import Owner
from mcp_harness.verbs.contracts import VERBS

if TYPE_CHECKING:
    from mcp_harness.binding import SessionBinding
    from mcp_harness.harness import Harness
    from mcp_harness.verbs.base import VerbContext

MAX_VALUES = 100
"""What one completion answers at most (the spec: values "must not exceed 100 items")."""
MEMORY_SCAN = 5000
"""Memory files looked at for one completion: enough for a typed prefix, bounded for a huge tree."""
ID_SCAN = 1000
"""Sessions or runs looked at for one completion (newest first)."""


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _memory(ctx: VerbContext, value: str) -> list[str]:
    files, _ = ctx.services.memory(ctx.agent).files_page(None, MEMORY_SCAN)
    return [path for path, _size, _mime in files if path.startswith(value)]


def _tools(harness: Harness, ctx: VerbContext, value: str) -> list[str]:
    from mcp_harness.callables.catalog import visible_documents

    names = list(VERBS) + [record.name for record in visible_documents(harness, ctx.agent)]
    return [name for name in dict.fromkeys(names) if name.startswith(value)]


def _triggers(harness: Harness, ctx: VerbContext, value: str) -> list[str]:
    return sorted({t.name for t in harness.triggers.of_agent(ctx.agent.id) if t.name.startswith(value)})


def _owned_ids(harness: Harness, ctx: VerbContext, table: str, value: str) -> list[str]:
    # A prefix over ids is one index range; the store modules have no such query, and this is read-only.
    sql = (
        f"SELECT id, account_id, agent_id FROM {table} WHERE account_id = ? AND id LIKE ? ESCAPE '\\' "
        "ORDER BY updated_at DESC LIMIT ?"
    )
    with harness.db.reading() as conn:
        rows = conn.execute(sql, (ctx.scope.account_id, _like(value), ID_SCAN)).fetchall()
    return [row[0] for row in rows if ctx.scope.sees(Owner(row[1], row[2]))]


def _hm(harness: Harness, argument: str, value: str, known: dict[str, str]) -> list[str]:
    with harness.db.reading() as conn:
        if argument == "account":
            sql = "SELECT DISTINCT space FROM hm_documents WHERE live = 1 AND space LIKE ? ESCAPE '\\' ORDER BY space"
            return [row[0] for row in conn.execute(sql, (_like(value),)).fetchall()]
        account = known.get("account", "")
        sql = (
            "SELECT path FROM hm_documents WHERE live = 1 AND space = ? AND path LIKE ? ESCAPE '\\' "
            "ORDER BY path LIMIT ?"
        )
        rows = conn.execute(sql, (account, _like("/" + value.lstrip("/")), ID_SCAN)).fetchall()
    return [str(row[0]).lstrip("/") for row in rows if str(row[0]).strip("/")]


PARAMETERS: dict[str, tuple[str, ...]] = {
    "harness://memory/{path}": ("path",),
    "harness://tools/{name}": ("name",),
    "harness://triggers/{name}": ("name",),
    "thread:{id}": ("id",),
    "run:{id}": ("id",),
    "hm://{account}/{path}": ("account", "path"),
    "ipfs://{cid}": ("cid",),
}


def complete_sync(
    binding: SessionBinding, template: str, argument: str, value: str, known: dict[str, str]
) -> list[str]:
    """Every completion of `argument` in `template` for this caller. Blocking."""
    ctx = binding.context_sync(create=False)
    harness = binding.harness
    if template == "harness://memory/{path}":
        return _memory(ctx, value)
    if template == "harness://tools/{name}":
        return _tools(harness, ctx, value)
    if template == "harness://triggers/{name}":
        return _triggers(harness, ctx, value)
    if template == "thread:{id}":
        return _owned_ids(harness, ctx, "sessions", value)
    if template == "run:{id}":
        return _owned_ids(harness, ctx, "runs", value)
    if template == "hm://{account}/{path}":
        return _hm(harness, argument, value, known)
    return []  # a CID is not something to guess


def _completion(values: Iterable[str]) -> types.CompleteResult:
    found = list(values)
    return types.CompleteResult(
        completion=types.Completion(values=found[:MAX_VALUES], total=len(found), has_more=len(found) > MAX_VALUES)
    )


async def complete(
    bound: Callable[[ServerRequestContext[Any, Any]], Awaitable[SessionBinding]],
    ctx: ServerRequestContext[Any, Any],
    params: types.CompleteRequestParams,
) -> types.CompleteResult:
    """The `completion/complete` handler: a resource template's parameter, or an error naming what is accepted."""
    ref, argument = params.ref, params.argument.name
    if not isinstance(ref, types.ResourceTemplateReference):
        raise MCPError(types.INVALID_PARAMS, "This server has no prompts: complete a resource template's parameter.")
    accepted = PARAMETERS.get(ref.uri)
    if accepted is None:
        raise MCPError(
            types.INVALID_PARAMS, f"Unknown resource template {ref.uri}. Templates: {', '.join(PARAMETERS)}."
        )
    if argument not in accepted:
        raise MCPError(
            types.INVALID_PARAMS, f"{ref.uri} has no parameter {argument!r}; it takes {', '.join(accepted)}."
        )
    known = dict(params.context.arguments or {}) if params.context is not None else {}
    binding = await bound(ctx)
    values = await anyio.to_thread.run_sync(complete_sync, binding, ref.uri, argument, params.argument.value, known)
    return _completion(values)


__all__ = ["MAX_VALUES", "PARAMETERS", "complete", "complete_sync"]
