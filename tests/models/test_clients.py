"""The sampling client, and the choice of client per provider type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import pytest

from mcp_harness.harness import Harness
from mcp_harness.models.clients import client_for
from mcp_harness.models.openai_chat import OpenAIChatClient
from mcp_harness.models.sampling import NO_SAMPLER, SamplingClient
from mcp_harness.models.wire import ModelRequest, ModelResponse, ProviderError, ToolCall, Usage
from tests.models.conftest import KEY, ask

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_fresh_http_client")]


@dataclass
class FakeSampler:
    fail_with: BaseException | None = None
    delay_s: float = 0.0
    seen: list[ModelRequest] = field(default_factory=list[ModelRequest])

    async def create_message(self, request: ModelRequest) -> ModelResponse:
        self.seen.append(request)
        await anyio.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        return ModelResponse("sampled", (ToolCall("s1", "read", {}),), Usage(1, 1))

    def unavailable(self, *, detached: bool) -> str | None:
        return None


async def test_sampling_forwards_to_the_sampler_and_maps_its_failures(open_harness: Callable[..., Harness]) -> None:
    h = open_harness()
    with pytest.raises(ProviderError) as caught:
        client_for(h, "sampling")
    assert caught.value.code == "config-error" and NO_SAMPLER in caught.value.message
    sampler = FakeSampler()
    client = client_for(h, "sampling", sampler=sampler)
    request = ask("brief")
    assert (await client.complete(request)).text == "sampled" and sampler.seen == [request]
    sampler.fail_with = RuntimeError("client went away")
    with pytest.raises(ProviderError) as caught:
        await client.complete(request)
    assert (caught.value.code, caught.value.retryable) == ("provider-error", True)
    sampler.fail_with = ProviderError("config-error", "the user declined")
    with pytest.raises(ProviderError) as caught:
        await client.complete(request)
    assert caught.value is sampler.fail_with
    sampler.fail_with, sampler.delay_s = None, 1.0
    with pytest.raises(ProviderError) as caught:
        await SamplingClient(sampler, timeout_s=0.05).complete(request)
    assert (caught.value.code, caught.value.retryable) == ("provider-error", True)


async def test_client_for_chooses_by_type_and_reports_missing_providers_and_keys_as_config_errors(
    open_harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    h = open_harness(
        claude={"type": "anthropic"},
        gem={"type": "google", "model": "gemini-2.5-flash"},
        router={"type": "openrouter"},
        llama={"type": "ollama"},
    )
    for name in ("nope", "claude", "gem"):
        with pytest.raises(ProviderError) as caught:
            client_for(h, name)
        assert (caught.value.code, caught.value.retryable) == ("config-error", False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    assert (
        repr(client_for(h, "claude")) == "AnthropicClient(name='claude', url='https://api.anthropic.com/v1/messages')"
    )
    gem = client_for(h, "gem")
    assert isinstance(gem, OpenAIChatClient) and KEY not in repr(gem)
    assert "generativelanguage.googleapis.com/v1beta/openai/chat/completions" in repr(gem)
    assert isinstance(client_for(h, "router"), OpenAIChatClient)
    assert "127.0.0.1:11434/v1/chat/completions" in repr(client_for(h, "llama"))
