"""What each provider type is: where its requests go, which key it takes, and the rules a declaration must meet.

Hosted types carry a pinned base URL. A declared or stored `base_url` never changes where their requests go,
because the key sent with them is the owner's: a tampered config file or database row must not be able to send
that key to another host. `custom` exists for an OpenAI-compatible server anywhere else, and `ollama` for a local
(or LAN) Ollama; both honour the URL they are given.

Every base URL here is the API root the model client appends its path to (`/chat/completions` for the OpenAI
wire format, `/v1/messages` for Anthropic's).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from mcp_harness.errors import BadRequest

ProviderType = Literal["openai", "anthropic", "google", "openrouter", "ollama", "custom", "sampling", "scripted"]
Wire = Literal["openai", "anthropic", "sampling", "scripted"]

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SECRET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
MAX_MODEL_CHARS = 256
MAX_SCRIPT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class ProviderKind:
    """The fixed facts of one provider type."""

    type: ProviderType
    wire: Wire
    """The protocol the model client speaks to it."""
    pinned_url: str | None = None
    """Hosted types: the only URL their requests (and key) go to."""
    default_url: str | None = None
    """Types that honour a given URL: the one used when none is given (custom has none and requires one)."""
    key_envs: tuple[str, ...] = ()
    """Standard environment variables for the key, first set one wins."""
    key_required: bool = False
    """Hosted services refuse anonymous requests, so a missing key is reported before any request is made."""

    @property
    def takes_url(self) -> bool:
        return self.type in ("ollama", "custom")

    @property
    def takes_key(self) -> bool:
        return self.wire in ("openai", "anthropic")


KINDS: dict[str, ProviderKind] = {
    k.type: k
    for k in (
        ProviderKind(
            type="openai",
            wire="openai",
            pinned_url="https://api.openai.com/v1",
            key_envs=("OPENAI_API_KEY",),
            key_required=True,
        ),
        ProviderKind(
            type="anthropic",
            wire="anthropic",
            pinned_url="https://api.anthropic.com",
            key_envs=("ANTHROPIC_API_KEY",),
            key_required=True,
        ),
        # Gemini through its OpenAI-compatible endpoint, so one OpenAI-format client serves every hosted type but
        # Anthropic (DESIGN §2 plans no native Gemini client).
        ProviderKind(
            type="google",
            wire="openai",
            pinned_url="https://generativelanguage.googleapis.com/v1beta/openai",
            key_envs=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            key_required=True,
        ),
        ProviderKind(
            type="openrouter",
            wire="openai",
            pinned_url="https://openrouter.ai/api/v1",
            key_envs=("OPENROUTER_API_KEY",),
            key_required=True,
        ),
        ProviderKind(type="ollama", wire="openai", default_url="http://127.0.0.1:11434"),
        ProviderKind(type="custom", wire="openai"),
        ProviderKind(type="sampling", wire="sampling"),
        ProviderKind(type="scripted", wire="scripted"),
    )
}
TYPES: tuple[str, ...] = tuple(KINDS)


def check_name(name: str) -> str:
    """Raises BadRequest unless `name` is a valid provider name."""
    if not NAME_RE.match(name):
        raise BadRequest(
            f"Provider name {name!r} is invalid: use 1-64 lowercase letters, digits, '-' or '_', starting with a "
            "letter or digit."
        )
    return name


def kind_of(type_: str, where: str) -> ProviderKind:
    kind = KINDS.get(type_)
    if kind is None:
        raise BadRequest(f"{where}: unknown provider type {type_!r}. Types: {', '.join(TYPES)}.")
    return kind


def normalize_url(url: str, where: str) -> str:
    """An absolute http(s) URL without credentials, query or fragment, and without a trailing slash."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError as exc:
        raise BadRequest(f"{where}: base URL {url!r} is not a valid URL ({exc}).") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadRequest(f"{where}: base URL {url!r} must be an absolute http:// or https:// URL.")
    if parts.username is not None or parts.password is not None:
        # The URL is stored and listed in plaintext; a credential inside it would escape the sealed store.
        raise BadRequest(f"{where}: base URL must not carry credentials; give the key as a secret or env var.")
    if parts.query or parts.fragment:
        raise BadRequest(f"{where}: base URL {url!r} must not have a query or fragment.")
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def effective_url(kind: ProviderKind, given: str | None) -> str | None:
    """Where requests go. Hosted types ignore `given`, whatever it says."""
    if kind.pinned_url is not None:
        return kind.pinned_url
    if not kind.takes_url:
        return None
    url = given or kind.default_url
    if url is None:
        return None
    if kind.type == "ollama" and not urlsplit(url).path.strip("/"):
        # Ollama's OpenAI-compatible API lives under /v1; people give the bare host:port they know from OLLAMA_HOST.
        url = url.rstrip("/") + "/v1"
    return url


def check_declaration(
    kind: ProviderKind,
    where: str,
    *,
    base_url: str | None,
    api_key_env: str | None,
    api_key_secret: str | None,
    model: str | None,
    file: Path | None,
) -> str | None:
    """Check one declaration against its type's rules; returns the normalized base URL given, if any.

    Raises:
        BadRequest: naming the setting that is wrong and what the type accepts.
    """
    url = normalize_url(base_url, where) if base_url else None
    if kind.pinned_url is not None and url is not None and url != kind.pinned_url:
        raise BadRequest(
            f"{where}: the {kind.type} type always uses {kind.pinned_url}, so that its key is never sent "
            f"elsewhere; drop base_url, or use type 'custom' for an OpenAI-compatible server at {url}."
        )
    if kind.type == "custom" and url is None:
        raise BadRequest(f"{where}: a custom provider needs base_url, the OpenAI-compatible API root (…/v1).")
    if url is not None and kind.pinned_url is None and not kind.takes_url:
        raise BadRequest(f"{where}: the {kind.type} type takes no base_url.")
    if not kind.takes_key and (api_key_env or api_key_secret):
        raise BadRequest(f"{where}: the {kind.type} type takes no API key.")
    if api_key_env is not None and not _ENV_RE.match(api_key_env):
        raise BadRequest(f"{where}: api_key_env {api_key_env!r} is not an environment variable name.")
    if api_key_secret is not None and not _SECRET_RE.match(api_key_secret):
        raise BadRequest(f"{where}: api_key_secret {api_key_secret!r} is not a secret name.")
    if model is not None and not 0 < len(model) <= MAX_MODEL_CHARS:
        raise BadRequest(f"{where}: model must be 1-{MAX_MODEL_CHARS} characters.")
    if file is not None:
        if kind.type != "scripted":
            raise BadRequest(f"{where}: only a scripted provider takes a file.")
        check_script_file(file, where)
    return url


def check_script_file(path: Path, where: str) -> None:
    """A scripted provider's file must be JSON: an array of replies, or an object with a `replies` array."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise BadRequest(f"{where}: cannot read the scripted replies file {path}: {exc.strerror}.") from exc
    if len(data) > MAX_SCRIPT_BYTES:
        raise BadRequest(f"{where}: the scripted replies file {path} is over {MAX_SCRIPT_BYTES} bytes.")
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"{where}: the scripted replies file {path} is not valid JSON ({exc}).") from exc
    if isinstance(parsed, dict) and isinstance(parsed.get("rules"), list):
        return  # {"rules": [{"when"?, "turns": [...]}], "replies"?: [...]}: per-conversation scripts
    replies = parsed.get("replies") if isinstance(parsed, dict) else parsed
    if not isinstance(replies, list):
        raise BadRequest(
            f"{where}: the scripted replies file {path} must hold a JSON array of replies, an object "
            '{"replies": [...]}, or {"rules": [{"when": "...", "turns": [...]}]}.'
        )
