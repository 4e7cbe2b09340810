"""AgentDefinition: what an agent is and may do, normalized with the limits of HARNESS §2."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import cbor2

from mcp_harness.errors import BadRequest
from mcp_harness.reasoning import REASONING_LEVELS, model_reasoning_support

MAX_NAME_BYTES = 256
MAX_PROMPT_BYTES = 64 * 1024
MAX_MODEL_BYTES = 256
MAX_TOOL_COUNT = 32
MAX_TOOL_NAME_BYTES = 128
MAX_TOOLS_TOTAL_BYTES = 4 * 1024
MAX_METADATA_CBOR_BYTES = 16 * 1024
MAX_ENABLED_MODEL_COUNT = 32

_FIELDS = {
    "name",
    "systemPrompt",
    "modelProvider",
    "model",
    "reasoningLevel",
    "enabledModels",
    "tools",
    "signingKey",
    "signingKeys",
    "metadata",
}


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """A normalized agent definition. `tools is None` means every service callable is granted."""

    name: str
    system_prompt: str
    model_provider: str
    model: str
    reasoning_level: str | None = None
    enabled_models: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] | None = None
    signing_key: str | None = None
    signing_keys: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=lambda: {})
    prompt_blocks: tuple[dict[str, Any], ...] = ()
    """The system prompt as the stored Seed block tree (`HMBlockNode[]`); `system_prompt` is its markdown."""

    def to_json(self) -> dict[str, Any]:
        """The wire form, with the reference field names; empty optionals omitted. The prompt is the block tree
        (the stored form, HARNESS §2) when there is one."""
        out: dict[str, Any] = {
            "name": self.name,
            "systemPrompt": list(self.prompt_blocks) if self.prompt_blocks else self.system_prompt,
            "modelProvider": self.model_provider,
            "model": self.model,
        }
        if self.reasoning_level is not None:
            out["reasoningLevel"] = self.reasoning_level
        if self.enabled_models:
            out["enabledModels"] = [{"provider": p, "model": m} for p, m in self.enabled_models]
        if self.tools is not None:
            out["tools"] = list(self.tools)
        if self.signing_key is not None:
            out["signingKey"] = self.signing_key
        if self.signing_keys:
            out["signingKeys"] = list(self.signing_keys)
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    def to_cbor(self) -> bytes:
        return cbor2.dumps(self.to_json(), canonical=True)

    @classmethod
    def from_cbor(cls, data: bytes) -> AgentDefinition:
        return normalize_definition(cbor2.loads(data))


AGENT_NAME_RULE = "1-64 of a-z 0-9 _ -, starting with a letter or digit"
_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def check_agent_name(name: str) -> str:
    """A name a new or renamed agent may take: a shell- and TOML-safe slug, since it is typed in commands and
    config. Never checked on load, so an agent named before this rule keeps working. Raises BadRequest."""
    if not _AGENT_NAME.fullmatch(name):
        raise BadRequest(f"Agent name {name!r} is invalid: use {AGENT_NAME_RULE} (e.g. 'researcher', 'gpt-5').")
    return name


def _bounded(value: object, label: str, limit: int) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{label} must be a string.")
    text = value.strip()
    if not text:
        raise BadRequest(f"{label} is required.")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise BadRequest(f"{label} is too large ({size} bytes; at most {limit}).")
    return text


def _optional_bounded(raw: dict[str, Any], key: str, label: str, limit: int) -> str | None:
    value = raw.get(key)
    return None if value is None else _bounded(value, label, limit)


def _tools(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise BadRequest('Tools must be a list of tool names, like ["search", "execute", "publish"].')
    items: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
    if len(items) > MAX_TOOL_COUNT:
        raise BadRequest(f"Too many tools ({len(items)}); at most {MAX_TOOL_COUNT} are accepted.")
    total = 0
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item or item != item.strip():
            raise BadRequest("Tools must be non-empty trimmed strings.")
        size = len(item.encode("utf-8", "surrogatepass"))
        if size > MAX_TOOL_NAME_BYTES:
            raise BadRequest(f"Tool name {item[:40]!r}… is too large ({size} bytes; at most {MAX_TOOL_NAME_BYTES}).")
        total += size
        out.append(item)
    if total > MAX_TOOLS_TOTAL_BYTES:
        raise BadRequest(f"Tool names total {total} bytes; at most {MAX_TOOLS_TOTAL_BYTES} are accepted.")
    return tuple(out)


def _enabled_models(value: object) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BadRequest("enabledModels must be a list of {provider, model} objects.")
    items: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
    if len(items) > MAX_ENABLED_MODEL_COUNT:
        raise BadRequest(f"enabledModels has {len(items)} entries; at most {MAX_ENABLED_MODEL_COUNT} are accepted.")
    seen: dict[tuple[str, str], None] = {}
    for item in items:
        if not isinstance(item, dict):
            raise BadRequest("enabledModels entries must be {provider, model} objects.")
        entry: dict[str, Any] = item  # pyright: ignore[reportUnknownVariableType]
        pair = (
            _bounded(entry.get("provider"), "Enabled model provider", MAX_NAME_BYTES),
            _bounded(entry.get("model"), "Enabled model", MAX_MODEL_BYTES),
        )
        seen.setdefault(pair, None)
    return tuple(seen)


def _metadata(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("metadata must be an object.")
    meta: dict[str, Any] = dict(value)  # pyright: ignore[reportUnknownArgumentType]
    try:
        size = len(cbor2.dumps(meta, canonical=True))
    except (cbor2.CBOREncodeError, TypeError, ValueError) as exc:
        raise BadRequest(f"metadata cannot be encoded: {exc}.") from exc
    if size > MAX_METADATA_CBOR_BYTES:
        raise BadRequest(f"metadata is too large ({size} bytes as CBOR; at most {MAX_METADATA_CBOR_BYTES}).")
    return meta


def _prompt(value: object) -> tuple[str, tuple[dict[str, Any], ...]]:
    """The prompt's markdown and block tree (HARNESS §2): a string is parsed as Seed markdown into blocks, a block
    array is checked node by node; either way the markdown is the blocks rendered back, without the empty
    frontmatter and id markers, trimmed."""
    from mcp_harness.hypermedia.blocks import tree_from_json, tree_to_json

    plain = _plain_prompt(value)
    if plain is not None:
        return plain
    from mcp_harness.hypermedia.markdown import parse_markdown, render_markdown

    if isinstance(value, list):
        _check_blocks(value, "System prompt")  # pyright: ignore[reportUnknownArgumentType]
        tree = tree_from_json(value)  # pyright: ignore[reportUnknownArgumentType]
    else:
        tree = parse_markdown(_bounded(value, "System prompt", MAX_PROMPT_BYTES)).tree
    markdown = render_markdown(tree, None, block_ids=False, frontmatter=False)
    return _bounded(markdown, "System prompt", MAX_PROMPT_BYTES), tuple(tree_to_json(tree))


_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ,.;:'\"?()/&%+=@-]*")
"""Prose with nothing markdown would read as syntax: it parses to one Paragraph holding the same text, and that
renders back unchanged (tests/test_domain.py checks this against the full converter)."""


def _plain_prompt(value: object) -> tuple[str, tuple[dict[str, Any], ...]] | None:
    """The prompt of a one-paragraph plain-prose definition without loading the markdown converter (the default
    agent is normalized at every start)."""
    from mcp_harness.hypermedia.blocks import new_block_id

    if isinstance(value, str):
        text = value.strip()
        if not _PLAIN.fullmatch(text) or len(text.encode("utf-8")) > MAX_PROMPT_BYTES:
            return None
        block = {"type": "Paragraph", "id": new_block_id(), "text": text, "annotations": [], "attributes": {}}
        return text, ({"block": block},)
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        node: dict[str, Any] = value[0]  # pyright: ignore[reportUnknownVariableType]
        block = node.get("block")
        if (
            set(node) <= {"block", "children"}
            and not node.get("children")
            and isinstance(block, dict)
            and block.get("type") == "Paragraph"
            and isinstance(block.get("id"), str)
            and block.get("id")
            and not block.get("annotations")
            and not block.get("attributes")
            and "link" not in block
            and isinstance(block.get("text"), str)
            and _PLAIN.fullmatch(block["text"])
        ):
            text: str = block["text"]
            return text, (
                {"block": {"type": "Paragraph", "id": block["id"], "text": text, "annotations": [], "attributes": {}}},
            )
    return None


def _check_blocks(nodes: list[Any], label: str) -> None:
    for node in nodes:
        block = node.get("block") if isinstance(node, dict) else None
        if (
            not isinstance(block, dict)
            or not isinstance(block.get("id"), str)
            or not block.get("id")
            or not isinstance(block.get("type"), str)
            or not block.get("type")
        ):  # pyright: ignore[reportUnknownMemberType]
            raise BadRequest(f"{label} blocks are invalid: each needs {{block: {{id, type, text?}}, children?}}.")
        children = node.get("children")  # pyright: ignore[reportUnknownMemberType, reportOptionalMemberAccess]
        if children is not None:
            if not isinstance(children, list):
                raise BadRequest(f"{label} block children are invalid: children must be a list.")
            _check_blocks(children, label)  # pyright: ignore[reportUnknownArgumentType]


def normalize_definition(raw: object, *, provider_type: str | None = None) -> AgentDefinition:
    """Validate and normalize a definition (create, update, and every load).

    `provider_type` is the type of the named model provider when known; it decides which reasoning levels the
    model accepts. Unknown keys are refused so a typo never silently drops a setting.

    Raises:
        BadRequest: naming the field that is wrong and what is accepted.
    """
    if not isinstance(raw, dict):
        raise BadRequest("An agent definition must be an object with name, systemPrompt, modelProvider and model.")
    data: dict[str, Any] = dict(raw)  # pyright: ignore[reportUnknownArgumentType]
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise BadRequest(
            f"Unknown agent definition field(s): {', '.join(unknown)}. Accepted: {', '.join(sorted(_FIELDS))}."
        )
    model_provider = _bounded(data.get("modelProvider"), "Model provider", MAX_NAME_BYTES)
    model = _bounded(data.get("model"), "Model", MAX_MODEL_BYTES)
    level = data.get("reasoningLevel")
    if level is not None:
        if level not in REASONING_LEVELS:
            raise BadRequest(f"Reasoning level is invalid: {level!r}. Accepted: {', '.join(REASONING_LEVELS)}.")
        support = model_reasoning_support(provider_type or model_provider, model)
        if support is None:
            raise BadRequest(f"Model {model} does not support a reasoning level; leave reasoningLevel unset.")
        if level not in support.levels:
            raise BadRequest(f"Model {model} accepts reasoning levels {', '.join(support.levels)}, not {level}.")
    signing_keys_raw = data.get("signingKeys")
    if signing_keys_raw is not None and not isinstance(signing_keys_raw, list):
        raise BadRequest("signingKeys must be a list of signing identity secret names.")
    signing_keys = tuple(
        _bounded(k, "Signing key", MAX_NAME_BYTES)
        for k in (signing_keys_raw or [])  # pyright: ignore[reportUnknownVariableType]
    )
    prompt_markdown, prompt_blocks = _prompt(data.get("systemPrompt"))
    return AgentDefinition(
        name=_bounded(data.get("name"), "Name", MAX_NAME_BYTES),
        system_prompt=prompt_markdown,
        prompt_blocks=prompt_blocks,
        model_provider=model_provider,
        model=model,
        reasoning_level=level,
        enabled_models=_enabled_models(data.get("enabledModels")),
        tools=_tools(data.get("tools")),
        signing_key=_optional_bounded(data, "signingKey", "Signing key", MAX_NAME_BYTES),
        signing_keys=tuple(dict.fromkeys(signing_keys)),
        metadata=_metadata(data.get("metadata")),
    )
