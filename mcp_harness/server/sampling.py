"""The `sampling` provider over MCP: server-run turns ask the connected client's model, with tools.

Two ways, one per protocol era. A 2025-11-25 client that declared `sampling.tools` is sent `sampling/createMessage`
on its session (the latest such session serves every run). In 2026-07-28 sampling exists only as input requests on
an open call (SEP-2322; deprecated by SEP-2577 but still defined), so a run reaches the client's model only while
it is in the tree of an open `delegate` call whose request declared `sampling.tools` (`mrtr.py`). Where that cannot
be — detached children, tasks, requests that did not declare it — `delegate` refuses at once (`unavailable`), and a
run that gets there anyway fails with a `config-error` saying why.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_harness.models.wire import Message, ModelRequest, ModelResponse, ProviderError, ToolCall, Usage
from mcp_harness.server.mrtr import ClientCalls, VerbOutcome

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from mcp.server.context import ServerRequestContext
    from mcp.server.request_state import RequestStateBoundary

    from mcp_harness.binding import SessionBinding
    from mcp_harness.harness import Harness
    from mcp_harness.verbs.base import Progress

INSTEAD = (
    "Give the agent a configured provider (`mcp-harness provider add NAME --type TYPE --model MODEL`, then "
    "`mcp-harness agent update AGENT --model-provider NAME`), or use a 2025-11-25 client that declares sampling with "
    "tools."
)
NO_CARRIER = (
    "The sampling provider needs the MCP client's model: a connected 2025-11-25 client that declares sampling with "
    "tools, or, in the 2026-07-28 protocol, an open delegate call whose request declares `sampling.tools`, with this "
    "run in its tree (a detached child, a task, or a run whose caller's call has ended has none). " + INSTEAD
)
NOT_DECLARED = (
    "The sampling provider needs the MCP client's model, but the 2026-07-28 delegate call this run works under did "
    "not declare the `sampling.tools` client capability, and in that protocol the model is reached only through the "
    "call that declares it. " + INSTEAD
)


@dataclass(frozen=True, slots=True)
class Carrier:
    """What the MCP request being handled can carry to the client's model."""

    modern: bool
    declares_tools: bool
    task: bool = False


_carrier: ContextVar[Carrier | None] = ContextVar("mcp_harness_sampling_carrier", default=None)


@contextmanager
def _carried(carrier: Carrier) -> Iterator[None]:
    token = _carrier.set(carrier)
    try:
        yield
    finally:
        _carrier.reset(token)


def declares_sampling_tools(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    sampling = getattr(caps, "sampling", None) if caps is not None else None
    return sampling is not None and getattr(sampling, "tools", None) is not None


class ClientSampler:
    """The `sampling` provider (`Sampler`) of the servers built on one harness, in both protocol eras."""

    def __init__(self, harness: Harness) -> None:
        previous = harness.sampler
        # Servers built on one harness share its open calls: a run routes through whichever sampler is current.
        self.calls = previous.calls if isinstance(previous, ClientSampler) else ClientCalls(harness)
        self.session: Any = None
        self._tg: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the server's lifespan: where 2026-07-28 delegate calls run between their rounds."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def request_state_boundary(self) -> RequestStateBoundary:
        """The SDK middleware sealing and checking `requestState` on every multi round-trip method."""
        return self.calls.boundary()

    def offer(self, ctx: ServerRequestContext[Any]) -> None:
        """A handshake-era request: remember its session if it can sample with tools."""
        if declares_sampling_tools(ctx):
            self.session = ctx.session

    @contextmanager
    def carrying(self, ctx: ServerRequestContext[Any, Any], *, task: bool = False) -> Iterator[None]:
        """While handling `ctx`: what it can carry, for `unavailable` (a task carries nothing back)."""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        with _carried(Carrier(modern=modern, declares_tools=declares_sampling_tools(ctx), task=task)):
            yield

    def carrying_capabilities(self, capabilities: Any) -> AbstractContextManager[None]:
        """`carrying` for a 2026-07-28 request answered on the wire (server/wire_calls.py): the raw
        `clientCapabilities` of its envelope."""
        sampling = capabilities.get("sampling") if isinstance(capabilities, dict) else None
        tools = sampling.get("tools") if isinstance(sampling, dict) else None
        return _carried(Carrier(modern=True, declares_tools=tools is not None))

    def unavailable(self, *, detached: bool) -> str | None:
        carrier = _carrier.get()
        if carrier is None or not carrier.modern:
            return None  # the handshake era, or no MCP request (the CLI): as before, the run finds out
        why = "in the 2026-07-28 protocol the client's model is reached only through input requests on an open call"
        if carrier.task:
            return (
                f"a delegate that became a task cannot reach: {why}, and a task leaves none open (a client without "
                "the Tasks extension keeps the call open)"
            )
        if detached:
            return f"a child started with `await: false` cannot reach: {why}, and a detached child has none"
        if not carrier.declares_tools:
            return f"this request cannot reach: {why} that declares `sampling.tools`, and this one does not"
        return None

    async def delegate(
        self,
        ctx: ServerRequestContext[Any, Any],
        binding: SessionBinding,
        arguments: dict[str, Any],
        params: types.CallToolRequestParams,
        report: Progress,
    ) -> VerbOutcome | types.InputRequiredResult:
        """A 2026-07-28 `delegate` round (see `mrtr.py`): the verb's outcome, or the input its tree needs."""
        can_sample = declares_sampling_tools(ctx)
        return await self.calls.delegate(ctx, binding, arguments, params, report, can_sample=can_sample, tg=self._tg)

    async def create_message(self, request: ModelRequest) -> ModelResponse:
        routed = await self.calls.route(request.context_key)
        if routed is not None:
            call, run_id = routed
            if not call.can_sample:
                raise ProviderError("config-error", NOT_DECLARED)
            answer = await call.ask(run_id, types.CreateMessageRequest(params=_params(request)))
            return _model_response(answer)
        session = self.session
        if session is None:
            raise ProviderError("config-error", NO_CARRIER)
        params = _params(request)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated upstream in 2026-07-28; still the handshake era's way
            result = await session.create_message(
                params.messages, max_tokens=params.max_tokens, system_prompt=params.system_prompt, tools=params.tools
            )
        return _model_response(result)


def _params(request: ModelRequest) -> types.CreateMessageRequestParams:
    tools = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in request.tools]
    return types.CreateMessageRequestParams(
        messages=[_sampling_message(m) for m in request.messages],
        max_tokens=request.max_output_tokens or 8192,
        system_prompt=request.system,
        tools=tools,
    )


def _model_response(result: types.CreateMessageResult | types.CreateMessageResultWithTools) -> ModelResponse:
    blocks: list[Any] = result.content if isinstance(result.content, list) else [result.content]
    text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")
    calls = tuple(
        ToolCall(id=b.id, name=b.name, arguments=dict(b.input)) for b in blocks if getattr(b, "type", "") == "tool_use"
    )
    return ModelResponse(text=text, tool_calls=calls, usage=Usage(), stop_reason=result.stop_reason, model=result.model)


def _sampling_message(message: Message) -> types.SamplingMessage:
    if message.role == "tool":
        block = types.ToolResultContent(
            tool_use_id=message.tool_call_id or "",
            content=[types.TextContent(type="text", text=message.content)],
            is_error=message.is_error or None,
        )
        return types.SamplingMessage(role="user", content=[block])
    if message.role == "assistant":
        content: list[Any] = [types.TextContent(type="text", text=message.content)] if message.content else []
        content += [types.ToolUseContent(name=c.name, id=c.id, input=c.arguments) for c in message.tool_calls]
        return types.SamplingMessage(role="assistant", content=content)
    return types.SamplingMessage(role="user", content=types.TextContent(type="text", text=message.content))
