"""The default agent's definition as `[agent]` describes it, checked as `agent create` checks a new one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp_harness.definition import AgentDefinition, check_agent_name, normalize_definition
from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.grants import check_grant_names

if TYPE_CHECKING:
    from mcp_harness.config import AgentSettings
    from mcp_harness.models.providers import ProviderRegistry


def configured_definition(
    a: AgentSettings, providers: ProviderRegistry, signing_key: Callable[[str], str]
) -> AgentDefinition:
    """Its name, its model (the provider's default when unset), its grants, and its signing keys (by label, account
    id or secret name, which `signing_key` resolves; stored as secret names).

    Raises:
        BadRequest: naming the `[agent]` setting that is wrong and what is accepted.
    """
    where = "Invalid configuration: [agent]"
    try:
        check_agent_name(a.name)
        check_grant_names(a.tools)
    except BadRequest as exc:
        raise BadRequest(f"{where}: {exc.message}") from exc
    model = a.model or providers.default_model(a.model_provider)
    if model is None:
        providers.require(a.model_provider)
        raise BadRequest(
            f"{where}: model is unset and provider {a.model_provider!r} has no default model. Set [agent] model, "
            f"or give the provider one (`mcp-harness provider add NAME --type T --model M`, or model in "
            f"[providers.{a.model_provider}])."
        )
    raw: dict[str, Any] = {
        "name": a.name,
        "systemPrompt": a.system_prompt,
        "modelProvider": a.model_provider,
        "model": model,
    }
    if a.reasoning_level:
        raw["reasoningLevel"] = a.reasoning_level
    if a.tools is not None:
        raw["tools"] = a.tools
    if a.signing_keys:
        try:
            raw["signingKeys"] = [signing_key(ref) for ref in a.signing_keys]
        except HarnessError as exc:
            raise BadRequest(f"{where} signing_keys: {exc.message}") from exc
    return normalize_definition(raw)
