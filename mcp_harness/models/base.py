"""The records of the provider registry: a resolved provider, where its key comes from, and what a client needs.

None of them holds a key except `Endpoint`, which exists only for the moment a request is made and keeps the key
out of its repr.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from mcp_harness.models.catalog import KINDS, ProviderKind

Source = Literal["builtin", "config", "stored"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Provider:
    """One usable provider, its URL already resolved. Holds where the key is, never the key."""

    name: str
    type: str
    base_url: str | None
    """The effective URL: the pinned one for hosted types, whatever was declared."""
    api_key_secret: str | None = None
    api_key_env: str | None = None
    """Only when one was declared; otherwise the type's standard variables apply."""
    model: str | None = None
    """Default model for agents naming this provider without one."""
    file: Path | None = None
    source: Source = "stored"

    @property
    def kind(self) -> ProviderKind:
        return KINDS[self.type]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "source": self.source,
            "baseUrl": self.base_url,
            "model": self.model,
            "file": None if self.file is None else str(self.file),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class KeySource:
    """Where a provider's key would come from, for listings: never the key."""

    kind: Literal["secret", "env", "none"]
    names: tuple[str, ...] = ()
    """The secret name, or the environment variables tried in order."""
    available: bool = False

    def describe(self) -> str:
        if self.kind == "none":
            return "none"
        if self.kind == "secret":
            return f"secret {self.names[0]}" + ("" if self.available else " (missing)")
        return f"env {' or '.join(self.names)} ({'set' if self.available else 'unset'})"


@dataclass(frozen=True, kw_only=True, slots=True)
class Endpoint:
    """What the model client needs to reach a provider."""

    provider: Provider
    base_url: str | None
    api_key: str | None = field(default=None, repr=False)


class SecretVault(Protocol):
    """The part of the sealed secret store providers use (`mcp_harness.store.secrets.SecretStore`)."""

    def set(
        self, account_id: str, name: str, value: bytes, *, kind: str = ..., metadata: dict[str, Any] | None = ...
    ) -> Any: ...
    def get_value(self, account_id: str, name: str) -> bytes: ...
    def find(self, account_id: str, name: str) -> Any | None: ...
    def delete(self, account_id: str, name: str) -> bool: ...


def secret_name(provider: str) -> str:
    """The sealed secret `provider add` stores a key under."""
    return f"provider-{provider}"
