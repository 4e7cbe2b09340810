"""What the HTTP model clients share (models/wire.py): errors classified with the provider's message and never the key,
no redirects, explicit timeouts, usage that adds up."""

from __future__ import annotations

import socket

import httpx2
import pytest
from starlette.responses import PlainTextResponse, Response

from mcp_harness.models import wire
from mcp_harness.models.anthropic import AnthropicClient
from mcp_harness.models.openai_chat import OpenAIChatClient
from mcp_harness.models.wire import Message, ModelRequest, ProviderError, Usage
from tests.models.conftest import KEY, FakeAPI, serve_fake

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_fresh_http_client")]


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [(400, "config-error", False), (401, "config-error", False), (429, "provider-error", True)]
    + [(500, "provider-error", True), (503, "provider-error", True)],
)
@pytest.mark.parametrize("wire_format", ["openai", "anthropic"])
async def test_http_errors_are_classified_with_the_providers_message_and_never_the_key(
    api: FakeAPI, status: int, code: str, retryable: bool, wire_format: str
) -> None:
    message = f"Bad key {KEY} or model. " + "x" * 2000
    body = (
        {"error": {"message": message}} if wire_format == "openai" else {"type": "error", "error": {"message": message}}
    )
    api.reply(body, status=status)
    client = (
        OpenAIChatClient(base_url=api.base, api_key=KEY, name="p")
        if wire_format == "openai"
        else AnthropicClient(base_url=api.base, api_key=KEY, name="p")
    )
    with pytest.raises(ProviderError) as caught:
        await client.complete(ModelRequest("m", "", (Message("user", "hi"),)))
    err = caught.value
    assert (err.code, err.retryable, err.http_status, err.status) == (code, retryable, status, status)
    assert "Bad key [redacted] or model" in err.message and KEY not in err.message
    assert len(err.message) < 600


async def test_a_refused_connection_and_a_read_timeout_are_retryable_provider_errors(api: FakeAPI) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with pytest.raises(ProviderError) as caught:
        await OpenAIChatClient(base_url=f"http://127.0.0.1:{closed_port}").complete(ModelRequest("m", "", ()))
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("provider-error", True, None)
    api.delay_s = 1.0
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(5.0, read=0.1)) as quick:
        with pytest.raises(ProviderError) as caught:
            await AnthropicClient(base_url=api.base, http=quick).complete(ModelRequest("m", "", ()))
    assert (caught.value.code, caught.value.retryable) == ("provider-error", True)
    assert "timed out" in caught.value.message


async def test_a_redirect_is_not_followed_so_the_key_stays_with_the_configured_host(api: FakeAPI) -> None:
    async with serve_fake() as elsewhere:
        api.replies.append(Response(status_code=307, headers={"location": f"{elsewhere.base}/v1/messages"}))
        with pytest.raises(ProviderError) as caught:
            await AnthropicClient(base_url=api.base, api_key=KEY).complete(ModelRequest("m", "", ()))
        assert elsewhere.seen == []
    assert len(api.seen) == 1
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("config-error", False, 307)


async def test_a_reply_that_is_not_json_or_has_no_choice_is_a_provider_error(api: FakeAPI) -> None:
    api.replies.append(PlainTextResponse("<html>gateway</html>"))
    api.reply({"error": {"message": "upstream overloaded", "code": 502}})
    api.reply({"error": {"message": "no such model", "code": 404}})
    client = OpenAIChatClient(base_url=api.base)
    request = ModelRequest("m", "", ())
    outcomes: list[tuple[str, int | None]] = []
    for _ in range(3):
        with pytest.raises(ProviderError) as caught:
            await client.complete(request)
        outcomes.append((caught.value.code, caught.value.http_status))
    assert outcomes == [("provider-error", 200), ("provider-error", 502), ("config-error", 404)]


async def test_the_shared_http_client_has_explicit_timeouts_and_follows_no_redirects() -> None:
    shared = wire.shared_http_client()
    assert shared is wire.shared_http_client()
    assert shared.follow_redirects is False
    assert (shared.timeout.connect, shared.timeout.read) == (10.0, 300.0)


async def test_usage_adds_up_and_serialises() -> None:
    total = Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40)
    assert total.to_json() == {"input": 11, "output": 22, "cacheRead": 33, "cacheWrite": 44, "total": 110}
