"""Text embeddings over the OpenAI-compatible `POST <base>/embeddings` endpoint, for semantic search.

The embedder is a configured provider (`[search] embeddings_provider`, one whose wire format is OpenAI's: openai,
google, openrouter, ollama or custom) with `[search] embeddings_model`; it reuses that provider's base URL and key
exactly as its chat client does (`providers.endpoint`), so a key is never sent anywhere the provider is not.

Wire format: `{model, input: [text, …]}` → `{data: [{embedding: [float, …], index}], model, usage}`. Every reply is
checked — one vector per input, each index once, numbers only, one dimension — because a vector silently matched to
the wrong text would rank results by someone else's meaning.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx2

from mcp_harness.errors import BadRequest
from mcp_harness.models.wire import ProviderError, post_json

if TYPE_CHECKING:
    from mcp_harness.config import SearchSettings
    from mcp_harness.models.providers import ProviderRegistry

BATCH = 64
"""Inputs per request (OpenAI takes up to 2,048; compatible servers often fewer)."""
MAX_INPUT_CHARS = 8000
"""Each input is cut to this many characters (about 2,000 tokens, well under every model's input limit)."""
SETTING = "[search] embeddings_provider"


class Embedder(Protocol):
    """What semantic search needs: a model name (vectors are stored per model) and texts to vectors."""

    @property
    def model(self) -> str: ...
    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class Registered(Protocol):
    @property
    def providers(self) -> ProviderRegistry: ...


@dataclass(frozen=True, kw_only=True)
class EmbeddingsClient:
    """POSTs `<base_url>/embeddings` in batches, with the key as a bearer token when there is one."""

    base_url: str
    model: str
    name: str
    api_key: str | None = field(default=None, repr=False)
    http: httpx2.AsyncClient | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            ProviderError: the server failed or answered something that is not one vector per input.
        """
        out: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            out += await self._batch([t[:MAX_INPUT_CHARS] for t in texts[start : start + BATCH]])
        return out

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        url = self.base_url.rstrip("/") + "/embeddings"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "input": texts}
        data = await post_json(self.http, url, body, headers=headers, provider=self.name, secret=self.api_key)
        return parse_embeddings(data, len(texts), self.name)


def parse_embeddings(data: dict[str, Any], expected: int, provider: str) -> list[list[float]]:
    """The vectors of a reply, ordered by `index`.

    Raises:
        ProviderError: (provider-error) the reply is not `expected` vectors of one dimension.
    """

    def bad(why: str) -> ProviderError:
        return ProviderError("provider-error", f"{provider}: the embeddings reply {why}.")

    items = data.get("data")
    if not isinstance(items, list):
        raise bad("has no data list")
    vectors: dict[int, list[float]] = {}
    for item in items:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(item, dict):
            raise bad("holds an item that is not an object")
        index, embedding = item.get("index"), item.get("embedding")  # pyright: ignore[reportUnknownMemberType]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected or index in vectors:
            raise bad(f"holds index {index!r}; expected each of 0..{expected - 1} once")
        if not isinstance(embedding, list) or not embedding:
            raise bad(f"has no embedding list at index {index}")
        numbers = [x for x in embedding if isinstance(x, int | float) and not isinstance(x, bool)]  # pyright: ignore
        if len(numbers) != len(embedding) or not all(math.isfinite(x) for x in numbers):  # pyright: ignore
            raise bad(f"has a value that is not a finite number at index {index}")
        vectors[index] = [float(x) for x in numbers]
    if len(vectors) != expected:
        raise bad(f"has {len(vectors)} vectors for {expected} inputs")
    if len({len(v) for v in vectors.values()}) > 1:
        raise bad("mixes vectors of different dimensions")
    return [vectors[i] for i in range(expected)]


def embedder_for(host: Registered, settings: SearchSettings, http: httpx2.AsyncClient | None = None) -> Embedder:
    """The configured embedder. Blocks (the provider registry, a sealed key): call it off the event loop.

    Raises:
        BadRequest: none is configured, or the provider cannot embed (the message names the setting to fix).
    """
    name = settings.embeddings_provider
    if not name:
        raise BadRequest(
            f"Semantic search needs an embeddings model, and none is configured: set {SETTING} (a provider with an "
            "OpenAI-compatible /v1/embeddings endpoint: openai, google, openrouter, ollama or custom) and "
            '[search] embeddings_model in the config, or search with searchType "keyword".'
        )
    provider = host.providers.require(name)
    if provider.kind.wire != "openai":
        raise BadRequest(
            f"{SETTING} names provider {name!r} of type {provider.type}, which has no OpenAI-compatible embeddings "
            "endpoint; name an openai, google, openrouter, ollama or custom provider."
        )
    model = settings.embeddings_model  # never the provider's own `model`: that is a chat model
    if not model:
        raise BadRequest(
            f"{SETTING} is {name!r} but [search] embeddings_model is not set: name the provider's embeddings model "
            '(e.g. "text-embedding-3-small").'
        )
    endpoint = host.providers.endpoint(provider)
    if endpoint.base_url is None:
        raise BadRequest(f"Provider {name!r} has no base URL to embed with; set its base_url.")
    return EmbeddingsClient(base_url=endpoint.base_url, model=model, name=name, api_key=endpoint.api_key, http=http)
