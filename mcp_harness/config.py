"""Settings: a TOML file, then `MCP_HARNESS_*` environment variables, then command-line flags, validated once.

Every setting is documented in `config.example.toml` (shipped in the package, next to this module); a key this
model does not know is refused with the list of known keys, so a typo never silently falls back to a default.
"""

import hashlib
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mcp_harness.errors import BadRequest

DEFAULT_HTTP = "127.0.0.1:8765"
# Empty lists and dicts are plain `default=[]` / `default={}` (pydantic copies a mutable default per instance), not
# `default_factory=list`: pydantic inspects a factory's signature, and a builtin's costs a tokenizer compile that a
# stdio server's cold start would pay. Annotations are not postponed for the same reason (no eval per field).


class AgentSettings(BaseModel):
    """The default agent, created from these values on first use."""

    model_config = ConfigDict(extra="forbid")

    name: str = "assistant"
    system_prompt: str = "You are a careful assistant. Keep notes in your memory and check your work."
    model_provider: str = "scripted"
    model: str | None = None
    """Unset: the provider's default model (`model` of its declaration; `scripted` for the built-in one)."""
    reasoning_level: str | None = None
    tools: list[str] | None = None
    signing_keys: list[str] = Field(default=[])
    """Signing identities the agent may publish as, by label, account id or secret name (`identity list`)."""


class TokenSettings(BaseModel):
    """One HTTP bearer token, stored only as its hash, and the (account, agent) its requests act as."""

    model_config = ConfigDict(extra="forbid")

    hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """`sha256:<hex>` of the token; `mcp-harness token new` prints a token and this line."""
    agent: str | None = None
    """Agent name or id the token's requests bind to (default: the configured agent)."""
    account: str = "local"
    label: str | None = None


class HttpSettings(BaseModel):
    """Streamable HTTP transport settings."""

    model_config = ConfigDict(extra="forbid")

    listen: str = DEFAULT_HTTP
    """HOST:PORT for `serve --http` when no address is given."""
    tokens: list[TokenSettings] = Field(default=[])
    """Accepted bearer tokens (hashes only); required for any bind that is not loopback."""
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """Largest HTTP request body accepted."""
    allowed_origins: list[str] = Field(default=[])
    """Browser origins allowed besides loopback ones (e.g. "https://app.example"); any other Origin is refused."""
    allowed_hosts: list[str] = Field(default=[])
    """Host header values allowed besides loopback ones and the bind address (e.g. "mcp.example:443")."""


class ProviderSettings(BaseModel):
    """A model provider declared in config (`[providers.<name>]`); `mcp-harness provider add` stores others."""

    model_config = ConfigDict(extra="forbid")

    type: str
    """openai, anthropic, google, openrouter, ollama, custom, sampling or scripted."""
    base_url: str | None = None
    """Only for ollama and custom; hosted types always use their pinned URL."""
    api_key_env: str | None = None
    """Environment variable holding the key (default: the type's standard one, e.g. OPENAI_API_KEY)."""
    api_key_secret: str | None = None
    """Name of a sealed secret holding the key (`mcp-harness secret set NAME`)."""
    model: str | None = None
    """Default model id for agents that name this provider without a model."""
    file: Path | None = None
    """For scripted: a JSON file of canned replies."""


class SandboxSettings(BaseModel):
    """Limits of the bubblewrap sandbox that runs `execute` and authored lambdas."""

    model_config = ConfigDict(extra="forbid")

    network: bool = False
    """Give sandboxed code network access. Off: the sandbox gets its own empty network namespace."""
    default_timeout_secs: int = Field(default=60, ge=1, le=300)
    """Wall-clock limit when a call names none; `timeout_secs` is clamped to [1, 300]."""
    cpu_secs: int = Field(default=300, ge=1)
    """CPU-time limit per call (RLIMIT_CPU)."""
    memory_mb: int = Field(default=1024, ge=64)
    """Address-space limit per process (RLIMIT_AS), in MiB."""
    max_processes: int = Field(default=64, ge=4)
    """Processes and threads one call may run at once: a pids cgroup per call where the server can create one,
    else RLIMIT_NPROC inside the call's own user namespace (see mcp_harness/sandbox/limits.py)."""
    max_file_mb: int = Field(default=256, ge=1)
    """Largest file one call may write (RLIMIT_FSIZE), in MiB."""
    python: str = "/usr/bin/python3"
    """The system interpreter for `python` code and Python lambdas (never the server's own venv)."""


class RunSettings(BaseModel):
    """The run engine: how much runs at once."""

    model_config = ConfigDict(extra="forbid")

    max_agent_runs: int = Field(default=16, ge=1, le=256)
    """Agent turns and model children executing at once (the reference uses 8; 16 lets ten parallel children and
    their parent run in one wave)."""
    heartbeat_s: float = Field(default=30.0, ge=0.1, le=60.0)
    """How often the engine beats and sweeps: the runs of a replica or process that died on this host are taken over
    within one beat (on another host, after five minutes without its beat — at most 60 s, so a live replica elsewhere
    misses five beats before it counts as dead)."""


class WebSettings(BaseModel):
    """Outbound HTTP: web reads, `write` fromUrl downloads and `web_search` (DESIGN §6)."""

    model_config = ConfigDict(extra="forbid")

    allow_hosts: list[str] = Field(default=[])
    """Hosts (names as written in URLs, or IP literals) that may be fetched even though they are loopback, private,
    link-local, CGNAT or metadata addresses. Everything else inside those ranges is refused."""
    connect_timeout_s: float = Field(default=10.0, gt=0, le=300)
    """Seconds to establish a connection."""
    read_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Seconds without data before a fetch is given up."""
    total_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    """Wall-clock limit of one fetch, redirects and body included."""
    max_download_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
    """Largest body `write ~/memory/<path> {fromUrl}` stores; a larger download is refused."""
    max_page_bytes: int = Field(default=5 * 1024 * 1024, ge=1024)
    """Largest body a `read https://…` downloads (the rest is cut, with a notice)."""
    max_redirects: int = Field(default=5, ge=0, le=20)
    """Redirect hops followed (each one re-checked)."""
    searxng_url: str | None = None
    """Base URL of a SearXNG instance with the JSON format enabled; unset, `web_search` is not offered."""
    user_agent: str = "mcp-harness/0.1.0"
    """User-Agent header of every outbound request."""


class IpfsSettings(BaseModel):
    """IPFS: where `read ipfs://<cid>` fetches what the local block store lacks, and how much it takes."""

    model_config = ConfigDict(extra="forbid")

    gateways: list[str] = Field(default_factory=lambda: ["https://ipfs.io"])
    """Gateways or Seed nodes (base URLs; `/ipfs/<cid>` is appended), tried in order through the guarded client;
    every block they send is checked against its CID. A loopback or private one needs `[web] allow_hosts`."""
    max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    """Largest file `read ipfs://` downloads and `write ipfs://` publishes; a larger one is refused."""
    max_block_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """Largest single block accepted from a gateway (IPFS's own limit is 2 MiB)."""


class TriggerSettings(BaseModel):
    """Triggers: the scheduler that fires them while the engine runs (HARNESS §10)."""

    model_config = ConfigDict(extra="forbid")

    poll_interval_s: float = Field(default=5.0, gt=0, le=3600)
    """How often the scheduler looks for due schedule triggers, in seconds (sooner when one falls due sooner)."""


_AGE_UNITS = {"h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}
_SIZE_UNITS = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_LIMIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
RETAIN_ACCEPTED = (
    'an age like "90d", "12h" or "2w", a size of the log like "500MB" or "2GiB", both (["90d", "5GB"] or '
    '"90d,5GB"), or "forever"'
)


def retention_limits(retain: str | list[str]) -> tuple[int | None, int | None]:
    """`[store] retain` as (max age in ms, max bytes of the log); None where it sets no limit.

    Raises:
        ValueError: the value is none of the forms `RETAIN_ACCEPTED` lists.
    """
    items = [part.strip() for part in retain.split(",")] if isinstance(retain, str) else retain
    if items == ["forever"]:
        return None, None
    age: int | None = None
    size: int | None = None
    for item in items:
        found = _LIMIT.match(item.lower()) if isinstance(item, str) else None
        number, unit = (float(found[1]), found[2]) if found else (0.0, "")
        if unit in _AGE_UNITS and age is None:
            age = int(number * _AGE_UNITS[unit])
        elif unit in _SIZE_UNITS and size is None:
            size = int(number * _SIZE_UNITS[unit])
        else:
            raise ValueError(f"{json_text(retain)} is not a retention: give {RETAIN_ACCEPTED}")
    if not items:
        raise ValueError(f"an empty list is not a retention: give {RETAIN_ACCEPTED}")
    return age, size


def json_text(value: Any) -> str:
    """A setting's value as the config shows it (TOML strings and lists read the same as JSON)."""
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


class HmServerSettings(BaseModel):
    """A Seed site or daemon the node pushes to and pulls from (`[[hypermedia.servers]]`, issue 19)."""

    model_config = ConfigDict(extra="forbid")

    url: str
    """Base URL, e.g. "https://seed.example" (its web API is under /api, its blobs under /ipfs)."""
    token_secret: str | None = None
    """Name of a sealed secret holding the bearer token its PublishBlobs needs (`mcp-harness secret set`)."""
    auto_push: bool = True
    """Push every publish here as it happens (else only `mcp-harness hm push`)."""


class HypermediaSettings(BaseModel):
    """The embedded Seed node on the network: the servers it syncs with and what it serves (issue 19)."""

    model_config = ConfigDict(extra="forbid")

    public: bool = False
    """Serve the Seed web API's reads (/api/*, /ipfs/*) to anyone `serve --http` admits without a token."""
    servers: list[HmServerSettings] = Field(default=[])
    max_blob_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """Largest single blob accepted from a push, a pull or PublishBlobs."""
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    """Largest PublishBlobs body, or pull response, accepted."""


class McpServerSettings(BaseModel):
    """An MCP server mounted behind `call` (`[[mcp.servers]]`, issue 20): stdio (`command`) or HTTP (`url`)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    command: list[str] | None = None
    env: dict[str, str] = Field(default={})
    env_secrets: dict[str, str] = Field(default={})
    """Environment variables whose values are sealed secrets (`mcp-harness secret set NAME`), by secret name."""
    url: str | None = None
    headers: dict[str, str] = Field(default={})
    bearer_secret: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)


class McpSettings(BaseModel):
    """Other MCP servers whose tools `call` reaches (issue 20)."""

    model_config = ConfigDict(extra="forbid")

    servers: list[McpServerSettings] = Field(default=[])


class SearchSettings(BaseModel):
    """The `search` callable's semantic and hybrid modes: which provider embeds, with which model."""

    model_config = ConfigDict(extra="forbid")

    embeddings_provider: str | None = None
    """A provider (config or `provider add`) with an OpenAI-compatible /v1/embeddings endpoint; unset, semantic and
    hybrid search are refused and a search naming no searchType is keyword."""
    embeddings_model: str | None = None
    """The embeddings model id at that provider, e.g. "text-embedding-3-small"."""
    min_similarity: float = Field(default=0.3, ge=-1.0, le=1.0)
    """Cosine similarity below which a semantic match is not a result."""


class StoreSettings(BaseModel):
    """What `mcp-harness gc` keeps of the event log and of finished runs' journals (nothing is pruned until it runs)."""

    model_config = ConfigDict(extra="forbid")

    retain: str | list[str] = "90d"
    """How long events and journals are kept (an age), how large the log may grow (a size), both, or "forever"."""
    keep_last: int = Field(default=200, ge=1)
    """Events every session keeps whatever their age or the size (what `read thread:<id>` shows)."""
    url: str | None = None
    """A PostgreSQL 15+ database (`postgresql://user:password@host/db`) to keep the store in instead of the SQLite
    file in the data dir, so several replicas share it (README, "Deploying several replicas"; docs/postgres.md).
    Unset: SQLite. Memory trees and attachments stay under the data dir, which the replicas must share."""

    @field_validator("url")
    @classmethod
    def _url_form(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"{json_text(value)} is not a PostgreSQL URL: give postgresql://user:password@host/db")
        return value

    @field_validator("retain", mode="before")
    @classmethod
    def _retain_form(cls, value: Any) -> Any:
        if not isinstance(value, str | list):
            raise ValueError(f"{json_text(value)} is not a retention: give {RETAIN_ACCEPTED}")
        retention_limits(value)  # pyright: ignore[reportUnknownArgumentType]
        return value  # pyright: ignore[reportUnknownVariableType]

    def limits(self) -> tuple[int | None, int | None]:
        """(max age in ms, max bytes of the log) of `retain`."""
        return retention_limits(self.retain)


class Settings(BaseModel):
    """All settings."""

    model_config = ConfigDict(extra="forbid")

    data_dir: Path = Field(default_factory=lambda: default_data_dir())
    log_level: str = "WARNING"
    agent: AgentSettings = Field(default_factory=AgentSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    providers: dict[str, ProviderSettings] = Field(default={})
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    runs: RunSettings = Field(default_factory=RunSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    ipfs: IpfsSettings = Field(default_factory=IpfsSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    triggers: TriggerSettings = Field(default_factory=TriggerSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    hypermedia: HypermediaSettings = Field(default_factory=HypermediaSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)


def default_data_dir() -> Path:
    """The per-user data directory: `$XDG_DATA_HOME/mcp-harness`, or the platform's equivalent."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "mcp-harness"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "mcp-harness"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mcp-harness"


_ENV: dict[str, tuple[str, ...]] = {
    "MCP_HARNESS_DATA_DIR": ("data_dir",),
    "MCP_HARNESS_LOG_LEVEL": ("log_level",),
    "MCP_HARNESS_AGENT": ("agent", "name"),
    "MCP_HARNESS_MODEL_PROVIDER": ("agent", "model_provider"),
    "MCP_HARNESS_MODEL": ("agent", "model"),
    "MCP_HARNESS_HTTP": ("http", "listen"),
    "MCP_HARNESS_STORE_URL": ("store", "url"),
}
TOKENS_ENV = "MCP_HARNESS_HTTP_TOKENS"
"""Comma-separated plaintext tokens for the default agent: hashed on load, never stored."""


def token_hash(token: str) -> str:
    """The form a token is stored and compared in."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data.setdefault(key, {})
    data[path[-1]] = value


CONFIG_ENV = "MCP_HARNESS_CONFIG"
EXAMPLE_CONFIG = Path(__file__).with_name("config.example.toml")
"""The documented example, shipped inside the package so every install has it (`mcp-harness config init`)."""


def default_config_path() -> Path:
    """Where the CLI and the server both look for a config when none is named:
    `$XDG_CONFIG_HOME/mcp-harness/config.toml`, else `~/.config/mcp-harness/config.toml`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mcp-harness" / "config.toml"


def config_location(config_file: Path | None = None) -> tuple[Path, str]:
    """The config file settings come from and who named it: `flag` (--config), `env` (MCP_HARNESS_CONFIG) or
    `default` (the default path, read only when it exists)."""
    if config_file is not None:
        return config_file, "flag"
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV]), "env"
    return default_config_path(), "default"


def example_hint() -> str:
    """Where a user finds every setting documented: the packaged example, and the copy `config init` writes."""
    return f"See {EXAMPLE_CONFIG} for every setting (`mcp-harness config init` copies it to {default_config_path()})"


def _file_layer(config_file: Path | None) -> tuple[dict[str, Any], Path | None]:
    path, origin = config_location(config_file)
    if origin == "default" and not path.is_file():
        return {}, None  # the default path is optional; a file the user named must exist
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")), path
    except OSError as exc:
        raise BadRequest(f"Cannot read config file {path}: {exc.strerror}.") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BadRequest(f"Config file {path} is not valid TOML: {exc}.") from exc


def _env_values() -> list[tuple[tuple[str, ...], Any]]:
    return [(target, os.environ[name]) for name, target in _ENV.items() if os.environ.get(name)]


def _leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        keys += _leaves(value, dotted + ".") if isinstance(value, dict) and value else [dotted]  # pyright: ignore
    return keys


def settings_with_sources(
    config_file: Path | None = None, **overrides: Any
) -> tuple[Settings, dict[str, str], Path | None]:
    """The settings, where each key given explicitly came from (`file`, `env` or `flag`; any other is a default),
    and the config file read (None when there is none).

    Raises:
        BadRequest: the file is unreadable or invalid, or a value fails validation.
    """
    data, path = _file_layer(config_file)
    sources = dict.fromkeys(_leaves(data), "file")
    for target, value in _env_values():
        _put(data, target, value)
        sources[".".join(target)] = "env"
    env_tokens = [t.strip() for t in os.environ.get(TOKENS_ENV, "").split(",") if t.strip()]
    if env_tokens:
        http = data.setdefault("http", {})
        http["tokens"] = [*http.get("tokens", []), *({"hash": token_hash(t), "label": "env"} for t in env_tokens)]
        sources["http.tokens"] = "env"
    for key, value in overrides.items():
        if value is not None:
            _put(data, tuple(key.split(".")), value)
            sources.update(dict.fromkeys(_leaves({key: value}) if isinstance(value, dict) else [key], "flag"))
    try:
        return Settings.model_validate(data), sources, path
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)
        )
        where = f" in {path}" if path is not None else ""
        raise BadRequest(f"Invalid configuration{where}: {problems}. {example_hint()}.") from exc


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from the config file (`config_file`, else `MCP_HARNESS_CONFIG`, else the default path when it
    exists), the environment, then `overrides` (flags).

    Raises:
        BadRequest: the file is unreadable or invalid, or a value fails validation.
    """
    return settings_with_sources(config_file, **overrides)[0]
