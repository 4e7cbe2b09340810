"""The sampling provider: the MCP client's own model, asked through `sampling/createMessage` with tools.

Only `server/` speaks MCP, so the request goes through a `Sampler` it supplies; this client bounds the wait and
makes every failure a `ProviderError`, so the run engine classifies it as it would an HTTP provider's. The bound
matters most in the 2026-07-28 protocol, where the request waits for a client to come back with the answer on its
next round of the delegate call: a client that never does leaves a retryable failure, and the turn's retry asks anew.
"""

from __future__ import annotations

import logging

import anyio

from mcp_harness.models.wire import ModelRequest, ModelResponse, ProviderError, Sampler

logger = logging.getLogger(__name__)

NO_SAMPLER = "the sampling provider needs an MCP client that supports sampling with tools"
DEFAULT_TIMEOUT_S = 600.0
"""A client may put each sampling request before its user for approval, so the wait is long, but not endless."""


class SamplingClient:
    """Forwards each request to `sampler`.

    Raises:
        ProviderError: (config-error, on construction) there is no sampler: the connected client cannot sample.
    """

    def __init__(
        self, sampler: Sampler | None, *, name: str = "sampling", timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        if sampler is None:
            raise ProviderError("config-error", f"{name}: {NO_SAMPLER}.")
        self._sampler = sampler
        self._name = name
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"SamplingClient(name={self._name!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            with anyio.fail_after(self._timeout_s):
                return await self._sampler.create_message(request)
        except ProviderError:
            raise
        except TimeoutError as exc:
            raise ProviderError(
                "provider-error", f"{self._name}: the MCP client did not answer within {self._timeout_s:g} s."
            ) from exc
        except Exception as exc:
            # The sampler is the MCP boundary: whatever it raises (a transport or JSON-RPC error this module cannot
            # name without importing the SDK) is, as HARNESS §8 says of any other thrown value, retryable.
            logger.warning("sampling request failed: %s", type(exc).__name__)
            raise ProviderError(
                "provider-error", f"{self._name}: the MCP client's sampling failed: {str(exc)[:500]}"
            ) from exc
