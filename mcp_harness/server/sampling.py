"""The `sampling` provider over MCP: server-run turns ask the connected client's model, with tools."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types

from mcp_harness.models.wire import Message, ModelRequest, ModelResponse

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext


class ClientSampler:
    """The `sampling` provider: server-run turns ask the connected MCP client's model (sampling with tools).

    The most recent handshake-era client that declared `sampling.tools` is used; runs that need it while no such
    client is connected fail with a clear `config-error`. Sampling is deprecated in the 2026-07-28 protocol
    (SEP-2577), so stateless clients never take this path.
    """

    def __init__(self) -> None:
        self.session: Any = None

    def offer(self, ctx: ServerRequestContext[Any]) -> None:
        caps = ctx.session.client_capabilities
        sampling = getattr(caps, "sampling", None) if caps is not None else None
        if sampling is not None and getattr(sampling, "tools", None) is not None:
            self.session = ctx.session

    async def create_message(self, request: ModelRequest) -> ModelResponse:
        import warnings

        from mcp_harness.models.wire import ProviderError, ToolCall, Usage

        session = self.session
        if session is None:
            raise ProviderError(
                "config-error", "The sampling provider needs a connected MCP client that supports sampling with tools."
            )
        messages = [_sampling_message(m) for m in request.messages]
        tools = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in request.tools]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated upstream in 2026-07-28; still the handshake era's way
            result = await session.create_message(
                messages, max_tokens=request.max_output_tokens or 8192, system_prompt=request.system, tools=tools
            )
        blocks = result.content if isinstance(result.content, list) else [result.content]
        text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")
        calls = tuple(
            ToolCall(id=b.id, name=b.name, arguments=dict(b.input))
            for b in blocks
            if getattr(b, "type", "") == "tool_use"
        )
        return ModelResponse(
            text=text, tool_calls=calls, usage=Usage(), stop_reason=result.stop_reason, model=result.model
        )


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
