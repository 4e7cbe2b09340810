"""The embeddings client against a real loopback server: the OpenAI wire format, batching, the provider's URL and key
reused, every malformed reply refused, and the configuration it is built from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcp_harness.config import SearchSettings
from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from mcp_harness.models import embeddings
from mcp_harness.models.embeddings import EmbeddingsClient, embedder_for
from mcp_harness.models.wire import ProviderError
from tests.models.conftest import KEY, FakeAPI

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_fresh_http_client")]


def reply(vectors: list[list[float]], order: list[int] | None = None) -> dict[str, Any]:
    indexes = order if order is not None else list(range(len(vectors)))
    return {"data": [{"index": i, "embedding": vectors[i]} for i in indexes], "model": "m", "usage": {}}


async def test_posts_model_and_inputs_with_the_providers_key_and_places_vectors_by_index(
    api: FakeAPI, open_harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMB_KEY", KEY)
    h = open_harness(lab={"type": "custom", "base_url": f"{api.base}/v1", "api_key_env": "EMB_KEY"})
    client = embedder_for(h, SearchSettings(embeddings_provider="lab", embeddings_model="embed-small"))
    assert client.model == "embed-small" and KEY not in repr(client)
    api.reply(reply([[1.0, 0.0], [0.0, 2]], order=[1, 0]))
    assert await client.embed(["first", "second"]) == [[1.0, 0.0], [0.0, 2.0]]
    [seen] = api.seen
    assert seen.path == "/v1/embeddings" and seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body == {"model": "embed-small", "input": ["first", "second"]}


async def test_batches_and_cuts_long_inputs(api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "BATCH", 2)
    client = EmbeddingsClient(base_url=f"{api.base}/v1/", model="m", name="lab")
    api.reply(reply([[1.0], [2.0]]))
    api.reply(reply([[3.0]]))
    texts = ["a", "b", "c" * (embeddings.MAX_INPUT_CHARS + 10)]
    assert await client.embed(texts) == [[1.0], [2.0], [3.0]]
    assert [s.body["input"] for s in api.seen] == [["a", "b"], ["c" * embeddings.MAX_INPUT_CHARS]]
    assert "authorization" not in api.seen[0].headers


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"model": "m"}, "has no data list"),
        ({"data": ["x"]}, "not an object"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}, "holds index 0"),
        ({"data": [{"index": 5, "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}]}, "holds index 5"),
        ({"data": [{"index": True, "embedding": [1.0]}]}, "holds index True"),
        ({"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": [1.0]}]}, "no embedding list"),
        ({"data": [{"index": 0, "embedding": ["1"]}, {"index": 1, "embedding": [1.0]}]}, "not a finite number"),
        ({"data": [{"index": 0, "embedding": [1.0]}]}, "has 1 vectors for 2 inputs"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}, "different dimensions"),
    ],
)
async def test_a_malformed_reply_is_refused(api: FakeAPI, body: dict[str, Any], why: str) -> None:
    api.reply(body)
    client = EmbeddingsClient(base_url=api.base, model="m", name="lab")
    with pytest.raises(ProviderError, match=why) as caught:
        await client.embed(["one", "two"])
    assert caught.value.code == "provider-error"


async def test_http_errors_keep_their_status(api: FakeAPI) -> None:
    api.reply({"error": {"message": "model not found"}}, status=404)
    with pytest.raises(ProviderError, match="HTTP 404: model not found"):
        await EmbeddingsClient(base_url=api.base, model="m", name="lab").embed(["x"])


async def test_configuration_is_checked_naming_the_setting(open_harness: Callable[..., Harness]) -> None:
    h = open_harness(
        lab={"type": "ollama", "model": "qwen3"}, claude={"type": "anthropic", "api_key_env": "NO_SUCH_ENV_VAR"}
    )
    cases = [
        (SearchSettings(), "set [search] embeddings_provider"),
        (SearchSettings(embeddings_provider="nope"), "No model provider named 'nope'"),
        (SearchSettings(embeddings_provider="claude", embeddings_model="x"), "no OpenAI-compatible embeddings"),
        (SearchSettings(embeddings_provider="lab"), "[search] embeddings_model is not set"),
    ]
    for settings, message in cases:
        with pytest.raises(BadRequest, match=message.replace("[", r"\[").replace("]", r"\]")):
            embedder_for(h, settings)
    ollama = embedder_for(h, SearchSettings(embeddings_provider="lab", embeddings_model="nomic-embed-text"))
    assert isinstance(ollama, EmbeddingsClient) and ollama.base_url == "http://127.0.0.1:11434/v1"
