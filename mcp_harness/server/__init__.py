"""The MCP front: binds each request to (agent, session), lists the verbs, maps results and refusals to the wire.

This package and `resources/` are the only ones that know MCP. Binding rules (DESIGN §3):
- no HTTP request (stdio, in-process): the server's own binding — a new session created on the first verb call,
  or the session named by `--session`;
- `/mcp/sessions/{id}`: that session, in both protocol eras;
- `/mcp`, handshake era: one harness session per MCP session id;
- `/mcp`, 2026-07-28 stateless era: the agent's standing session.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_harness import __version__
from mcp_harness.binding import SessionBinding
from mcp_harness.callables.catalog import promoted_callables
from mcp_harness.config import TokenSettings
from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.harness import Harness
from mcp_harness.resources import RESOURCE_TEMPLATES, list_resources, read_resource
from mcp_harness.server import apps
from mcp_harness.server.completions import complete
from mcp_harness.server.sampling import ClientSampler
from mcp_harness.server.subscriptions import Subscriptions
from mcp_harness.server.transports import TOKEN_SCOPE_KEY, http_app, serve_http, serve_stdio
from mcp_harness.server.wire_calls import WireCalls
from mcp_harness.verbs.base import Progress, VerbResult
from mcp_harness.verbs.contracts import RETURN_RESULT_DESCRIPTION, TASKS_EXTENSION, VERBS, VerbSpec

logger = logging.getLogger(__name__)

_SESSION_PATH = re.compile(r"^/mcp/sessions/([^/]+)/?$")
MAX_TRACKED_HTTP_SESSIONS = 10_000
INSTRUCTIONS = (
    "mcp-harness gives you five verbs. read and write reach addresses: ~/memory/<path> is your persistent memory, "
    "~/self describes you, ~/tools/ lists what you can do, thread: lists conversations. plan keeps a visible "
    "checklist. Read ~/tools/<verb> for any verb's full contract."
)


def _tool(spec: VerbSpec) -> types.Tool:
    """A contract as an MCP tool: the concise description (the full contract is `read ~/tools/<name>`), and the
    hints without `annotations.title`, which would only repeat the tool's own `title`."""
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=spec.open_world,
        ),
        _meta=apps.tool_meta(spec.name),  # MCP Apps: delegate and plan name their view (server/apps.py)
    )


VERB_TOOLS = [_tool(spec) for spec in VERBS.values()]


ONCE_ABOVE_BYTES = 128 * 1024
"""A result whose text and structured form are each larger than this is sent once (the text), not twice."""
SMALL_FIELD_BYTES = 1024


def _structured(result: VerbResult) -> dict[str, Any]:
    """The result's structured form, unless it would carry the large body the text block already carries: one
    Streamable HTTP event holds both, and clients refuse events over 1 MiB (a transcript or page read as JSON would
    pass it). Then only its small fields go, with `contentInText: true`."""
    if len(result.text) <= ONCE_ABOVE_BYTES:
        return result.data
    encoded = {key: json.dumps(value, ensure_ascii=False, default=str) for key, value in result.data.items()}
    if sum(len(v) for v in encoded.values()) <= ONCE_ABOVE_BYTES:
        return result.data
    small = {key: result.data[key] for key, text in encoded.items() if len(text) <= SMALL_FIELD_BYTES}
    return {**small, "contentInText": True}


HTTP_IMAGE_BYTES = 700 * 1024
"""Over Streamable HTTP a result is one server-sent event, and the SDK's client drops events over 1 MiB: a larger
image (4/3 bigger in base64) is replaced by a note there. Over stdio every image the verb shows is sent."""


def image_content(result: VerbResult, request: Any) -> list[types.TextContent | types.ImageContent]:
    """The result's images as MCP image content, so the client's model sees them (issue 18)."""
    import base64

    blocks: list[types.TextContent | types.ImageContent] = []
    for image in result.images:
        if getattr(request, "url", None) is not None and len(image.data) > HTTP_IMAGE_BYTES:
            note = (
                f"[{image.label or 'The image'} ({image.mime_type}, {len(image.data)} bytes) is not sent over HTTP: "
                f"one MCP message there holds at most 1 MiB, so images over {HTTP_IMAGE_BYTES} bytes are left out. "
                "Serve over stdio to see it, or work on it with call execute.]"
            )
            blocks.append(types.TextContent(type="text", text=note))
            continue
        data = base64.b64encode(image.data).decode("ascii")
        blocks.append(types.ImageContent(type="image", data=data, mime_type=image.mime_type))
    return blocks


def tool_result(result: VerbResult, request: Any) -> types.CallToolResult:
    """A verb's answer as the client sees it: its text and images, or an upstream server's own content blocks
    unchanged; its structured form; its `_meta` (MCP Apps' view link) and an upstream tool's `isError`."""
    if result.content is not None:
        return types.CallToolResult.model_validate(_upstream_fields(result))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.text), *image_content(result, request)],
        structured_content=_structured(result),
        is_error=result.is_error,
        _meta=result.meta,
    )


def _upstream_fields(result: VerbResult) -> dict[str, Any]:
    """An upstream's answer (`result.content` set) in its wire form: the blocks as they came, its `isError` and
    `_meta`, and its own structured content or none (`data` is then empty): never ours."""
    assert result.content is not None
    fields: dict[str, Any] = {"content": list(result.content), "isError": result.is_error, "resultType": "complete"}
    if result.data:
        fields["structuredContent"] = _structured(result)
    if result.meta is not None:
        fields["_meta"] = result.meta
    return fields


def _call_result(
    verb: str, result: VerbResult | None, error: HarnessError | None, request: Any
) -> types.CallToolResult:
    if error is not None:
        return error_result(error)
    assert result is not None
    if verb in apps.VIEWED_VERBS:  # MCP Apps: the result links the view and names the run it follows
        result = replace(result, meta=apps.result_meta(verb, result.data, result.meta))
    return tool_result(result, request)


def call_result_fields(verb: str, result: VerbResult | None, error: HarnessError | None) -> dict[str, Any]:
    """`_call_result`'s answer in its wire form, for `WireCalls` to hand the SDK's serializer (which validates it).
    An upstream's blocks go as they are: the models `tool_result` builds would only be dumped again (issue 20)."""
    if error is None and result is not None and result.content is not None and verb not in apps.VIEWED_VERBS:
        return _upstream_fields(result)
    return _call_result(verb, result, error, None).model_dump(by_alias=True, mode="json", exclude_none=True)


def error_result(error: HarnessError) -> types.CallToolResult:
    """A refusal as the model sees it: `isError`, the message, and `structuredContent.error`."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error.message)],
        structured_content={"error": error.to_dict()},
        is_error=True,
    )


@dataclass
class ServerState:
    """Per-process state of the MCP front: the harness and the bindings it has handed out."""

    harness: Harness
    agent_name: str | None
    default: SessionBinding
    by_mcp_session: OrderedDict[tuple[str, str | None], SessionBinding] = field(default_factory=lambda: OrderedDict())
    by_path: OrderedDict[tuple[str, str | None], SessionBinding] = field(default_factory=lambda: OrderedDict())
    standing: dict[tuple[str | None, str | None], SessionBinding] = field(default_factory=lambda: {})

    def _agent_id(self, agent_name: str | None) -> str:
        return self.harness.agent(agent_name).id

    async def promoted(self, binding: SessionBinding) -> dict[str, VerbSpec]:
        """Callables this binding's session has touched, as contracts; only on session-bound endpoints (DESIGN §3)."""
        if binding.kind == "standing" or binding.session_id is None:
            return {}

        def compute() -> dict[str, VerbSpec]:
            ctx = binding.context_sync(create=False)
            assert ctx.session_id is not None
            return promoted_callables(self.harness, ctx.agent, ctx.session_id)

        return await anyio.to_thread.run_sync(compute)

    async def announce_promotions(self, ctx: ServerRequestContext[ServerState], binding: SessionBinding) -> None:
        """Tell a handshake-era client its tool list grew (`notifications/tools/list_changed`)."""
        now = await self.promoted(binding)
        if binding.promoted is not None and set(now) == set(binding.promoted):
            return
        if binding.promoted is None and not now:
            return
        binding.promoted = now
        try:
            await ctx.session.send_tool_list_changed()
        except Exception:  # a client that hung up mid-call must not turn a finished call into an error
            logger.info("could not send tools/list_changed", exc_info=True)

    def binding_for(self, ctx: ServerRequestContext[Any, Any]) -> SessionBinding:
        request = ctx.request
        url = getattr(request, "url", None)
        if url is None:
            return self.default
        scope: dict[str, Any] = getattr(request, "scope", {})
        token: TokenSettings | None = scope.get(TOKEN_SCOPE_KEY)
        # A token scoped to an agent confines its requests to that agent; an owner token (or loopback without
        # tokens) acts as the server's agent and sees the whole account.
        confined = token.agent if token is not None and token.agent else None
        agent_name = confined or self.agent_name
        match = _SESSION_PATH.match(url.path)
        if match:
            session_id = match.group(1)
            return self._remember(
                self.by_path,
                (session_id, confined),
                lambda: SessionBinding(self.harness, agent_id="", session_id=session_id, confined_to=confined),
            )
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            found = self.standing.get((agent_name, confined))
            if found is None:
                found = self.standing[(agent_name, confined)] = SessionBinding(
                    self.harness, agent_id=self._agent_id(agent_name), kind="standing", confined_to=confined
                )
            return found
        mcp_session = request.headers.get("mcp-session-id", "") if request is not None else ""  # pyright: ignore
        title = f"HTTP session {datetime.now(UTC):%Y-%m-%d %H:%M}"
        return self._remember(
            self.by_mcp_session,
            (mcp_session, f"{agent_name}|{confined}"),
            lambda: SessionBinding(
                self.harness, agent_id=self._agent_id(agent_name), title=title, confined_to=confined
            ),
        )

    async def bound(self, ctx: ServerRequestContext[Any, Any]) -> SessionBinding:
        """The request's binding, its named session checked (it exists and this caller may see it). A session the
        caller may not use is a clean JSON-RPC error, the same for a missing one and someone else's."""
        return await self.checked(self.binding_for(ctx))

    async def checked(self, binding: SessionBinding) -> SessionBinding:
        """`binding`, its named session checked (as `bound`)."""
        if binding.session_id is not None and not binding.verified:
            try:
                await anyio.to_thread.run_sync(binding.ensure_sync)
            except HarnessError as exc:
                raise MCPError(types.INVALID_PARAMS, exc.message) from None
        return binding

    @staticmethod
    def _remember(
        table: OrderedDict[tuple[str, str | None], SessionBinding],
        key: tuple[str, str | None],
        make: Callable[[], SessionBinding],
    ) -> SessionBinding:
        found = table.get(key)
        if found is None:
            found = table[key] = make()
            while len(table) > MAX_TRACKED_HTTP_SESSIONS:
                table.popitem(last=False)
        return found


async def _deliver_result(
    harness: Harness, binding: SessionBinding, schema: dict[str, Any], payload: dict[str, Any]
) -> types.CallToolResult:
    """An outside client (or agent framework) working a delegated child delivers its typed result."""
    from mcp_harness.runs.deliver import deliver_typed_result

    assert binding.session_id is not None
    result, error = await deliver_typed_result(harness, binding.session_id, schema, payload)
    if error is not None:
        return error_result(error)
    assert result is not None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.text)], structured_content=result.data
    )


def _may_promote(verb: str, arguments: dict[str, Any], known: dict[str, VerbSpec] | None = None) -> bool:
    """Only `call` and `read ~/tools/<name>` can touch a callable, so only they can change the promoted set — and
    a call that succeeded on a name already promoted (`known`, the set the client was last told) changes nothing:
    the recount is skipped on the path every repeated call of a promoted tool takes."""
    if verb == "call":
        return known is None or arguments.get("tool") not in known
    address = arguments.get("address")
    return verb == "read" and isinstance(address, str) and address.strip().startswith("~/tools/")


def _progress_reporter(ctx: ServerRequestContext[ServerState]) -> Progress:
    """Status lines as `notifications/progress` (a no-op when the request carries no progress token)."""
    count = 0

    async def report(message: str) -> None:
        nonlocal count
        count += 1
        await ctx.session.report_progress(count, message=message)

    return report


def _return_result_tool(schema: dict[str, Any]) -> types.Tool:
    return types.Tool(
        name="return_result",
        title="Return result",
        description=RETURN_RESULT_DESCRIPTION,
        input_schema=schema,
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    )


def build_server(
    harness: Harness, *, agent_name: str | None = None, session_id: str | None = None, engine_after_s: float = 0.0
) -> HarnessServer:
    """The MCP server over `harness`. `session_id` binds stdio/in-process calls to an existing session;
    `engine_after_s` starts the engine that long after the server (`Harness.engine_running`)."""
    agent = harness.agent(agent_name)
    if session_id is not None:
        harness.sessions.get(session_id)
    title = f"MCP session {datetime.now(UTC):%Y-%m-%d %H:%M}"
    state = ServerState(
        harness=harness,
        agent_name=agent_name,
        default=SessionBinding(harness, agent_id=agent.id, session_id=session_id, title=title),
    )

    @asynccontextmanager
    async def lifespan(_: Server[ServerState]) -> AsyncIterator[ServerState]:
        async with harness.engine_running(after_s=engine_after_s), sampler.running(), live.running():
            yield state

    sampler = ClientSampler(harness)
    harness.sampler = sampler
    live = Subscriptions(harness, state.bound)  # resources/subscribe and subscriptions/listen (live resources)

    async def on_list_tools(
        ctx: ServerRequestContext[ServerState], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            sampler.offer(ctx)
        binding = await state.bound(ctx)
        tools = list(VERB_TOOLS)
        promoted = await state.promoted(binding)
        binding.promoted = promoted
        tools += [_tool(spec) for spec in promoted.values()]
        owed = await binding.owed_output_schema()
        if owed is not None:
            tools.append(_return_result_tool(owed))
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[ServerState], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            sampler.offer(ctx)
        binding = await state.bound(ctx)
        name = params.name
        arguments = params.arguments or {}
        if name == "return_result":
            owed = await binding.owed_output_schema()
            if owed is not None:
                return await _deliver_result(state.harness, binding, owed, arguments)
        if name in VERBS:
            verb, verb_input = name, arguments
        elif name in await state.promoted(binding):
            # A promoted callable is a shortcut for `call`: same validation, same log, same promotion.
            verb, verb_input = "call", {"tool": name, "input": arguments}
        else:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool {name!r}. Tools: {', '.join(VERBS)}.")
        if verb == "delegate" and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # The 2026-07-28 era: the call's tree reaches the client's model only as input requests on this call.
            answer = await sampler.delegate(ctx, binding, verb_input, params, _progress_reporter(ctx))
            if isinstance(answer, types.InputRequiredResult):
                return answer
            result, error = answer
        else:
            result, error = await binding.invoke(verb, verb_input, progress=_progress_reporter(ctx))
        known = binding.promoted if error is None else None
        if _may_promote(verb, verb_input, known) and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            await state.announce_promotions(ctx, binding)
        return _call_result(verb, result, error, ctx.request)

    async def on_call_on_the_wire(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """`on_call_tool` for what `WireCalls` takes: a verb but delegate, 2026-07-28, stdio, no progress token."""
        binding = await state.checked(state.default)
        result, error = await binding.invoke(name, arguments)
        return call_result_fields(name, result, error)

    async def on_list_resources(
        ctx: ServerRequestContext[ServerState], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await list_resources(await state.bound(ctx), params.cursor if params else None)

    async def on_list_resource_templates(
        ctx: ServerRequestContext[ServerState], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=RESOURCE_TEMPLATES)

    async def on_read_resource(
        ctx: ServerRequestContext[ServerState], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await read_resource(await state.bound(ctx), params.uri, ctx.protocol_version)

    async def on_call_tool_or_task(
        ctx: ServerRequestContext[ServerState], params: types.CallToolRequestParams
    ) -> HandlerResult:
        arguments = params.arguments or {}
        if params.name == "delegate" and isinstance(arguments.get("brief"), list):
            from mcp_harness.server.brief_content import lift_brief  # content blocks: files become attachments

            try:
                arguments = await lift_brief(await state.bound(ctx), arguments)
            except HarnessError as exc:
                return error_result(exc)
            params = params.model_copy(update={"arguments": arguments})
        if params.name == "delegate" and arguments.get("await") is not False and _declares_tasks(ctx):
            # The client takes a task handle and polls tasks/get; the child is the same durable run.
            from mcp_harness.verbs import delegate_tasks

            binding = await state.bound(ctx)
            with sampler.carrying(ctx, task=True):
                task, error = await delegate_tasks.start(await binding.context(), arguments)
            if error is not None or task is None:
                return error_result(error or BadRequest("delegate could not start."))
            return {"resultType": "task", **task}
        with sampler.carrying(ctx):  # for delegate's check: can what it spawns reach the client's model?
            return await on_call_tool(ctx, params)

    async def on_task(ctx: ServerRequestContext[ServerState], params: TaskParams) -> dict[str, Any]:
        """`tasks/get`, `tasks/update` and `tasks/cancel` (SEP-2663) for this session's delegate tasks."""
        from mcp_harness.verbs import delegate_tasks

        if not _declares_tasks(ctx):
            raise MCPError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"Missing required client capability: {ctx.method} needs the {TASKS_EXTENSION} extension, declared "
                "in the request's client capabilities (2026-07-28 protocol).",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        binding = await state.bound(ctx)
        harness_ = state.harness
        try:
            ctx_v = await binding.context(create=False)
            run = await harness_.engine.offload(delegate_tasks.client_task, harness_, ctx_v.session_id, params.task_id)
        except HarnessError as exc:
            raise MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: {exc.message}") from None
        if ctx.method == "tasks/cancel":
            await delegate_tasks.cancel(harness_, run)
            return {"resultType": "complete"}  # an empty acknowledgement; tasks/get shows where the tree stands
        if ctx.method == "tasks/update":
            # A delegated child never asks its caller for input, so no request is ever outstanding: the SEP has
            # responses to keys that are not outstanding ignored, and the update acknowledged.
            return {"resultType": "complete"}
        return {"resultType": "complete", **delegate_tasks.task_of(run)}

    server = HarnessServer(
        "mcp-harness",
        version=__version__,
        title="mcp-harness",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
        on_subscribe_resource=live.subscribe,
        on_unsubscribe_resource=live.unsubscribe,
        on_subscriptions_listen=live.listen,
        on_completion=partial(complete, state.bound),
    )
    server.extensions[TASKS_EXTENSION] = {}
    server.extensions[apps.EXTENSION_ID] = {}  # MCP Apps: the ui:// view in resources/list and resources/read
    server.middleware.append(sampler.request_state_boundary())
    server.add_request_handler("tools/call", types.CallToolRequestParams, on_call_tool_or_task)
    server.add_request_handler("tasks/get", TaskParams, on_task)
    server.add_request_handler("tasks/cancel", TaskParams, on_task)
    server.add_request_handler("tasks/update", TaskUpdateParams, on_task)
    server.wire_calls = WireCalls(
        on_call_on_the_wire,
        frozenset(VERBS) - {"delegate"},
        lambda: server.server_info_stamp,
        sampler.carrying_capabilities,
    )
    return server


class HarnessServer(Server[ServerState]):
    """The lowlevel server, declaring what it sends: promotion changes the tool list of a session, and handshake-era
    clients are told with `notifications/tools/list_changed` (the 2026-07-28 era derives the flag itself)."""

    wire_calls: WireCalls | None = None
    """The `tools/call` requests a stdio transport may answer beside the SDK's pipeline (`server/wire_calls.py`)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        # A 2026-07-28 listen stream carries resource updates only (server/subscriptions.py): the SDK would also
        # claim tool and resource list changes for serving subscriptions/listen at all.
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            if caps.tools is not None:
                caps.tools.list_changed = False
            if caps.resources is not None:
                caps.resources.list_changed = False
        return caps


class TaskParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel` params (SEP-2663)."""

    task_id: str


class TaskUpdateParams(TaskParams):
    """`tasks/update` params: responses keyed by the input requests they answer."""

    input_responses: dict[str, Any] | None = None


MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
"""SEP-2575's error for a request that needs a capability (here the Tasks extension) its client did not declare."""


def _declares_tasks(ctx: ServerRequestContext[ServerState]) -> bool:
    """Whether this request's client takes tasks: a 2026-era request declaring the Tasks extension (older wires
    cannot carry an extension result)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = getattr(capabilities, "extensions", None) if capabilities is not None else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


__all__ = [
    "BadRequest",
    "HarnessServer",
    "ServerState",
    "build_server",
    "error_result",
    "http_app",
    "serve_http",
    "serve_stdio",
]
