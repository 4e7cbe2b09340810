"""Choosing the model client for a provider: its type's wire format decides (`catalog.KINDS`).

| wire        | types                                      | client             |
|-------------|--------------------------------------------|--------------------|
| `openai`    | openai, google, openrouter, ollama, custom | `OpenAIChatClient` |
| `anthropic` | anthropic                                  | `AnthropicClient`  |
| `scripted`  | scripted                                   | `ScriptedClient`   |
| `sampling`  | sampling                                   | `SamplingClient`   |

Hosted types get their pinned URL from the registry, never one from a request or a row.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio.to_thread
import httpx2

from mcp_harness.errors import BadRequest
from mcp_harness.models.anthropic import AnthropicClient
from mcp_harness.models.openai_chat import OpenAIChatClient
from mcp_harness.models.sampling import SamplingClient
from mcp_harness.models.scripted import ScriptedClient
from mcp_harness.models.wire import ModelClient, ProviderError, Sampler

if TYPE_CHECKING:
    from mcp_harness.models.providers import ProviderRegistry


class Registered(Protocol):
    """Where the provider registry is: its owner builds it on first use (that checks the config's providers)."""

    @property
    def providers(self) -> ProviderRegistry: ...


def client_for(
    host: Registered,
    provider_name: str,
    *,
    sampler: Sampler | None = None,
    http: httpx2.AsyncClient | None = None,
) -> ModelClient:
    """The client that sends requests to the named provider. Blocks (the registry's SQLite, the secret store, a
    script file): from async code use `open_client`.

    `http` replaces the process's shared HTTP client (tests); `sampler` is the MCP client's model, for the
    sampling provider.

    Raises:
        ProviderError: (config-error) no such provider, no key for a hosted one, no sampler for the sampling
            provider, or an invalid script.
    """
    try:
        provider = host.providers.require(provider_name)
        wire = provider.kind.wire
        if wire == "scripted":
            if provider.file is None:
                return ScriptedClient(name=provider.name)
            return _scripted_from_file(provider.file, provider.name)
        if wire == "sampling":
            return SamplingClient(sampler, name=provider.name)
        endpoint = host.providers.endpoint(provider)
    except BadRequest as exc:
        # A run fails on this without retrying: no attempt will find the provider or its key.
        raise ProviderError("config-error", exc.message) from exc
    if endpoint.base_url is None:
        raise ProviderError("config-error", f"Provider {provider.name!r} has no base URL.")
    if wire == "anthropic":
        return AnthropicClient(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            name=provider.name,
            default_model=provider.model,
            http=http,
        )
    return OpenAIChatClient(
        base_url=endpoint.base_url,
        api_key=endpoint.api_key,
        provider_type=provider.type,
        name=provider.name,
        default_model=provider.model,
        http=http,
    )


async def open_client(
    host: Registered,
    provider_name: str,
    *,
    sampler: Sampler | None = None,
    http: httpx2.AsyncClient | None = None,
) -> ModelClient:
    """`client_for`, run off the event loop."""
    return await anyio.to_thread.run_sync(
        functools.partial(client_for, host, provider_name, sampler=sampler, http=http)
    )


_SCRIPTS: dict[tuple[str, str], tuple[tuple[int, int], ScriptedClient]] = {}


def _scripted_from_file(path: Path, name: str) -> ScriptedClient:
    """Scripts are read once per file version: every child run of a fan-out asks for the same one."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # no such file: from_file says so
        stamp = (0, 0)
    else:
        stamp = (st.st_mtime_ns, st.st_size)
    key = (str(path), name)
    cached = _SCRIPTS.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    client = ScriptedClient.from_file(path, name=name)
    _SCRIPTS[key] = (stamp, client)
    return client
