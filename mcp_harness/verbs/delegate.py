"""`delegate` (HARNESS §6): model children with typed results, detached children, limits and the result shape.

Two callers, one spawn path. A server-run turn spawns and parks (the agent loop collects every delegate call of a
reply, so they run at the same time, and resumes when all resolve). An MCP client's `tools/call` stays open until
the child resolves, reporting progress; cancelling the call cancels the child tree.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread

from mcp_harness.errors import BadRequest
from mcp_harness.scope import Scope
from mcp_harness.services import Runs, Stores
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.delegate_spawn import (
    CHILD_MAX_ATTEMPTS,
    MAX_BRIEF_BYTES,
    MAX_CHILDREN_PER_RUN,
    MAX_DEPTH,
    MAX_SESSION_CHILDREN,
    ChildBatch,
    Spawned,
    SpawnWrites,
    brief_text,
    scope_of,
    spawn_child,
    spawn_depth,
    title_of,
)
from mcp_harness.verbs.plan import running_step
from mcp_harness.verbs.schema_subset import shape_errors

if TYPE_CHECKING:
    from mcp_harness.store.runs import RunRecord


class Spawner(Stores, Runs, Protocol):
    """The stores a child is written to, and the engine that runs it (woken for a detached child, awaited for an
    MCP client's)."""


def normalize_spec(arguments: dict[str, Any]) -> dict[str, Any]:
    """The model-child spec after the reference's rescue rules (`normalizeSubSessionSpec`)."""
    raw = dict(arguments)
    if "input" not in raw and "brief" in raw:
        raw["input"] = raw.pop("brief")
    if "input" not in raw and isinstance(raw.get("prompt"), str) and raw["prompt"].strip():
        raw["input"] = raw.pop("prompt")  # a bare prompt is the brief, not a persona
    if "input" not in raw or raw["input"] is None:
        raise BadRequest("delegate requires a `brief` — the task briefing as human-readable markdown.")
    if isinstance(raw.get("prompt"), str) and isinstance(raw.get("agentId"), str):
        raise BadRequest("Provide either prompt or agentId, not both.")
    spec: dict[str, Any] = {"input": raw["input"]}
    for key in ("title", "prompt", "agentId"):
        if isinstance(raw.get(key), str) and raw[key].strip():
            spec[key] = raw[key].strip() if key != "prompt" else raw[key]
    if isinstance(raw.get("tools"), list):
        spec["tools"] = [t for t in raw["tools"] if isinstance(t, str)]  # pyright: ignore[reportUnknownVariableType]
    if "output" in raw and raw["output"] is not None:
        problems = shape_errors(raw["output"])
        if problems:
            raise BadRequest(f"output schema is not supported: {'; '.join(problems)}.")
        spec["output"] = raw["output"]
    return spec


def script_source(arguments: dict[str, Any]) -> str | None:
    """The script of a `delegate {script}` call: a non-empty string is checked before anything else (HARNESS §6)."""
    script = arguments.get("script")
    return script if isinstance(script, str) and script.strip() else None


def spawn_script(
    stores: Stores,
    *,
    agent_id: str,
    parent_session_id: str,
    parent_run: RunRecord | None,
    tool_call_id: str,
    arguments: dict[str, Any],
    scope: Scope | None = None,
) -> Spawned:
    """`delegate {script}`: lint, check depth, and enqueue a `workflow` run with the source pinned on it. It has no
    session of its own (its result carries `sessionId: null`); `parentSessionId` in its input says where its result
    is delivered. Blocking; one transaction."""
    import hashlib

    from mcp_harness.sandbox.monty import lint_script
    from mcp_harness.store._util import new_id

    source = arguments["script"]
    scope = scope_of(stores, parent_run, scope)
    if arguments.get("brief") is not None:
        raise BadRequest(
            "delegate takes exactly one of brief (a model child) or script (a script child), not both; pass the "
            "script's data as input."
        )
    if arguments.get("await") is False:
        raise BadRequest(
            "Detached script children are not supported: scripts are awaited; drop `await: false`, or delegate a "
            "model child with `brief` to work in the background."
        )
    title = arguments["title"].strip()[:256] if isinstance(arguments.get("title"), str) else ""
    title = title or "Script"
    problems = lint_script(source)
    if problems:
        raise BadRequest("Workflow source rejected:\n" + "\n".join(f"- {p}" for p in problems))
    depth = (spawn_depth(stores, parent_run) if parent_run is not None else 0) + 1
    if depth > MAX_DEPTH:
        raise BadRequest(f"Workflow depth limit reached ({MAX_DEPTH})")
    run_input: dict[str, Any] = {
        "input": arguments.get("input"),
        "parentToolCallId": tool_call_id,
        "parentToolName": "delegate",
        "parentSessionId": parent_session_id,
        **scope.for_run(),
    }
    step = running_step(stores.sessions.get_plan(parent_session_id))
    if step is not None:
        run_input["planStepId"], run_input["planStepLabel"] = step["id"], step["label"]
    run_id = new_id()
    stores.runs.enqueue(
        run_id=run_id,
        account_id=stores.account_id,
        kind="workflow",
        title=title,
        origin="agent",
        agent_id=agent_id,
        input=run_input,
        parent_run_id=parent_run.id if parent_run is not None else None,
        parent_tool_call_id=tool_call_id,
        queue="background",
        max_attempts=1,
        source_text=source,
        source_cid="sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest(),
    )
    return Spawned(run_id=run_id, session_id=None, title=title)


def spawn_detached(
    host: Spawner,
    *,
    agent_id: str,
    parent_session_id: str,
    parent_run: RunRecord | None,
    arguments: dict[str, Any],
    scope: Scope | None = None,
) -> VerbResult:
    """`await: false`: a new top-level-ish session of this agent, run in the background; nothing comes back."""
    from mcp_harness.store._util import new_id

    scope = scope_of(host, parent_run, scope)
    for field in ("agentId", "output", "tools"):
        if field in arguments:
            raise BadRequest(
                f"delegate {{await: false}} does not support `{field}` — a detached child runs as this agent and "
                "returns nothing; await it (the default) to narrow it, type its result or pick another agent."
            )
    brief = arguments.get("brief", arguments.get("input", arguments.get("prompt")))
    if brief is None:
        raise BadRequest("delegate requires a `brief` — the task briefing as human-readable markdown.")
    text = brief_text(brief).strip()
    if len(text.encode("utf-8")) > MAX_BRIEF_BYTES:
        raise BadRequest(f"The brief is over {MAX_BRIEF_BYTES} bytes; put the data in memory and point to it.")
    if host.sessions.chain_depth(parent_session_id) >= MAX_DEPTH:
        raise BadRequest(f"Session spawn chain limit reached ({MAX_DEPTH}); finish the work here.")
    if host.sessions.count_children(parent_session_id) >= MAX_SESSION_CHILDREN:
        raise BadRequest(f"This session already started {MAX_SESSION_CHILDREN} sessions; finish the work here.")
    spec = {"title": arguments["title"]} if isinstance(arguments.get("title"), str) else {}
    title = title_of({**spec, "input": text}, "Agent-started session")
    run_id = new_id()
    with host.db.transaction():
        session = host.sessions.create(
            host.account_id,
            agent_id,
            kind="conversation",
            title=title,
            parent_session_id=parent_session_id,
            run_id=run_id,
        )
        host.sessions.append(session.id, {"type": "message", "role": "user", "content": text}, "agent")
        host.runs.enqueue(
            run_id=run_id,
            account_id=host.account_id,
            kind="agent",
            title=title,
            origin="agent",
            agent_id=agent_id,
            session_id=session.id,
            input=scope.for_run(),
            parent_run_id=parent_run.id if parent_run is not None else None,
            queue="background",
            max_attempts=CHILD_MAX_ATTEMPTS,
        )
    host.engine.wake()
    data = {
        "summary": f'Started detached child "{title}"; it is now running in the background.',
        "status": "detached",
        "sessionId": session.id,
        "runId": run_id,
        "title": title,
    }
    return VerbResult.of(data)


def result_of(child: RunRecord) -> dict[str, Any]:
    """The delegate result a parent receives for a finished child (HARNESS §6)."""
    out: dict[str, Any] = {"status": child.status, "runId": child.id, "sessionId": child.session_id}
    if child.status == "succeeded":
        out["output"] = child.output
    elif child.status == "failed":
        error = child.error or {}
        out["error"] = {"code": error.get("code") or "run-failed", "message": error.get("message") or "The run failed."}
    return out


def render_result(data: dict[str, Any]) -> VerbResult:
    status = data["status"]
    summary = {
        "succeeded": "The child succeeded.",
        "failed": f"The child failed ({data.get('error', {}).get('code', 'run-failed')}): "
        f"{data.get('error', {}).get('message', '')}",
        "canceled": "The child was canceled.",
    }.get(status, f"The child is {status}.")
    body = json.dumps(data.get("output"), indent=2, ensure_ascii=False) if "output" in data else None
    return VerbResult.of({"summary": summary, **data}, f"```json\n{body}\n```" if body else None)


async def spawn_for_client(ctx: VerbContext, arguments: dict[str, Any]) -> Spawned | VerbResult:
    """Spawn what an MCP client's `delegate` asks for: the child to await, or (detached) the finished answer."""
    services = ctx.services
    if ctx.session_id is None:
        raise BadRequest("delegate needs a session.")
    session_id = ctx.session_id
    call_id = ctx.call_id or "client-call"
    await _refuse_unreachable_model(ctx, arguments)
    if script_source(arguments) is not None:
        return await services.engine.offload(
            lambda: spawn_script(
                services,
                agent_id=ctx.agent.id,
                parent_session_id=session_id,
                parent_run=None,
                tool_call_id=call_id,
                arguments=arguments,
                scope=ctx.scope,
            )
        )
    if arguments.get("await") is False:
        return await services.engine.offload(
            lambda: spawn_detached(
                services,
                agent_id=ctx.agent.id,
                parent_session_id=session_id,
                parent_run=None,
                arguments=arguments,
                scope=ctx.scope,
            )
        )
    spec = normalize_spec(arguments)
    return await services.engine.offload(
        lambda: spawn_child(
            services,
            agent_id=ctx.agent.id,
            parent_session_id=session_id,
            parent_run=None,
            tool_call_id=call_id,
            spec=spec,
            scope=ctx.scope,
        )
    )


async def _refuse_unreachable_model(ctx: VerbContext, arguments: dict[str, Any]) -> None:
    """A child on the `sampling` provider (the client's own model) is refused now, not failed later in its run, when
    the request spawning it cannot carry its model requests: the sampler says why (the 2026-07-28 era's limits)."""
    services = ctx.services
    detached = arguments.get("await") is False
    reason = services.sampler.unavailable(detached=detached) if services.sampler is not None else None
    if reason is None or script_source(arguments) is not None:
        return  # a script's children are checked as they run: it names their agents only then
    named = arguments.get("agentId") if not detached else None

    def sampling_agent() -> tuple[str, str] | None:
        agent = ctx.agent
        if isinstance(named, str) and named.strip():
            agent = services.agents.find(services.account_id, named.strip())
            if agent is None or not ctx.scope.may_act_as(agent):
                return None  # spawn_child refuses it, as for any caller
        provider = services.providers.get(agent.definition.model_provider)
        return (agent.definition.name, provider.name) if provider and provider.kind.wire == "sampling" else None

    found = await services.engine.offload(sampling_agent)
    if found is not None:
        raise BadRequest(
            f"Agent {found[0]!r} runs on the `{found[1]}` provider, the MCP client's own model, which {reason}. Give "
            f"it a configured provider (`mcp-harness provider add NAME --type TYPE --model MODEL`, then `mcp-harness "
            f"agent update {found[0]} --model-provider NAME`), or delegate from a 2025-11-25 client that declares "
            "sampling with tools."
        )


async def delegate(ctx: VerbContext, arguments: dict[str, Any]) -> VerbResult:
    """`delegate` called by an MCP client: the call stays open until the child resolves, with progress."""
    spawned = await spawn_for_client(ctx, arguments)
    if isinstance(spawned, VerbResult):
        return spawned
    return await _await_spawned(ctx, spawned)


async def _await_spawned(ctx: VerbContext, spawned: Spawned) -> VerbResult:
    """Hold the client's call open until the child resolves; cancelling the call cancels the child's tree."""
    services = ctx.services
    engine = services.engine
    services.awaited_children.add(spawned.run_id)
    engine.wake()
    try:
        if ctx.progress is not None:
            where = f"session {spawned.session_id}" if spawned.session_id else f"run {spawned.run_id}"
            await ctx.progress(f'Started child "{spawned.title}" ({where}).')
        child = await _await_child(services, spawned, ctx)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await engine.cancel(spawned.run_id)
        raise
    finally:
        services.awaited_children.discard(spawned.run_id)
    return render_result(result_of(child))


HEARTBEAT_S = 4.0
"""A progress notification goes out at least this often while a child works, so a client whose timeout resets on
progress never gives up on a long model turn."""


async def _await_child(host: Spawner, spawned: Spawned, ctx: VerbContext) -> RunRecord:
    """Wait for the child, reporting what it does — on every change, and as a heartbeat while nothing changes."""
    engine = host.engine
    last, last_sent = "", 0.0
    started = anyio.current_time()
    result: list[RunRecord] = []

    async def wait() -> None:
        result.append(await engine.wait_for(spawned.run_id))
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        while True:
            await anyio.sleep(0.5)
            if ctx.progress is None:
                continue
            note = await engine.offload(_status_note, host, spawned)
            now = anyio.current_time()
            if note != last or now - last_sent >= HEARTBEAT_S:
                last, last_sent = note, now
                await ctx.progress(f"{note} ({now - started:.0f} s)")
    return result[0]


def _status_note(stores: Stores, spawned: Spawned) -> str:
    """What the child is doing: its status, its model reply count and the tool it is in, tokens so far, its plan."""
    run = stores.runs.get(spawned.run_id)
    note = f'Child "{spawned.title}" is {run.status}'
    if spawned.session_id is not None and run.status == "running":
        replies, open_call = _activity(stores, spawned.session_id)
        note += f", calling {open_call}" if open_call else f", waiting on model reply {replies + 1}"
    tokens = (run.usage or {}).get("total")
    if tokens:
        note += f"; {tokens} tokens so far"
    plan = stores.sessions.get_plan(spawned.session_id) if spawned.session_id else None
    steps = (plan or {}).get("steps") or []
    if steps:
        done = sum(1 for s in steps if s.get("status") in ("done", "failed", "skipped"))
        current = next((s["label"] for s in steps if s.get("status") == "running"), None)
        note += f"; plan {done}/{len(steps)}" + (f", working on: {current}" if current else "")
    return note + "."


def _activity(stores: Stores, session_id: str) -> tuple[int, str | None]:
    """Model replies so far in a child's session, and the tool its newest call is running, if unanswered."""
    with stores.db.reading() as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM session_events WHERE session_id = ? AND type = 'message' AND actor = 'agent'",
            (session_id,),
        ).fetchone()
    newest = stores.sessions.events(session_id, last=1)
    open_call: str | None = None
    if newest and newest[0].type == "tool_call":
        payload = newest[0].payload
        tool = (payload.get("input") or {}).get("tool") if payload.get("name") == "call" else None
        open_call = f"call {tool}" if isinstance(tool, str) else str(payload.get("name"))
    return max(0, int(row[0]) - 1), open_call  # the brief is the first message


__all__ = [
    "CHILD_MAX_ATTEMPTS",
    "HEARTBEAT_S",
    "MAX_BRIEF_BYTES",
    "MAX_CHILDREN_PER_RUN",
    "MAX_DEPTH",
    "MAX_SESSION_CHILDREN",
    "ChildBatch",
    "SpawnWrites",
    "Spawned",
    "Spawner",
    "brief_text",
    "delegate",
    "normalize_spec",
    "render_result",
    "result_of",
    "script_source",
    "spawn_child",
    "spawn_depth",
    "spawn_detached",
    "spawn_for_client",
    "spawn_script",
    "title_of",
]
