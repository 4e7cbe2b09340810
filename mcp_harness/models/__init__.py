"""Model providers: which exist, where their requests go, and where their keys come from.

The model clients (OpenAI-compatible, Anthropic, MCP sampling, scripted) arrive with the run engine; this package
declares, validates and resolves the providers they will use.
"""

from mcp_harness.models.base import Endpoint, KeySource, Provider
from mcp_harness.models.catalog import KINDS, TYPES, ProviderKind
from mcp_harness.models.providers import ProviderRegistry

__all__ = ["KINDS", "TYPES", "Endpoint", "KeySource", "Provider", "ProviderKind", "ProviderRegistry"]
