"""The model provider registry: built-in providers, `[providers.<name>]` from config, and providers added with the CLI.

A name resolves in that order. Built-ins (`scripted`, `sampling`) always exist, so the default agent works with no
configuration. The config file wins over a stored row of the same name: it is the owner's reviewed, deployed
declaration, and a row added later must not quietly replace it (adding such a row is refused anyway; one can only
appear when the config gains the name afterwards).

Keys come from a sealed secret or from an environment variable, read when needed and never logged or listed.
Methods block (SQLite, the master key); call them off the event loop.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_harness.errors import BadRequest, Conflict, NotFound
from mcp_harness.models.base import Endpoint, KeySource, Provider, SecretVault, secret_name
from mcp_harness.models.catalog import KINDS, check_declaration, check_name, effective_url, kind_of
from mcp_harness.store.providers import ProviderRow, ProviderStore

if TYPE_CHECKING:
    from mcp_harness.config import Settings
    from mcp_harness.store import AgentStore, Database

logger = logging.getLogger(__name__)

BUILTIN_TYPES = ("scripted", "sampling")
"""Each built-in provider is named after its type."""
MAX_KEY_BYTES = 16 * 1024


class ProviderRegistry:
    """Every provider the account can name. Config declarations are checked once, here, and refused if invalid.

    `vault` is called for the secret store only when a key is sealed, read or deleted: opening it loads the master
    key, which listing providers or serving without secrets never needs.

    Raises:
        BadRequest: (on construction) a `[providers.<name>]` section breaks its type's rules.
    """

    def __init__(
        self,
        settings: Settings,
        db: Database,
        *,
        agents: AgentStore,
        vault: Callable[[], SecretVault],
        account_id: str,
    ) -> None:
        self._db = db
        self._agents = agents
        self._vault = vault
        self._account = account_id
        self._store = ProviderStore(db)
        self._builtin = {t: Provider(name=t, type=t, base_url=None, source="builtin") for t in BUILTIN_TYPES}
        self._config: dict[str, Provider] = {}
        for name, declared in settings.providers.items():
            where = f"Invalid configuration: [providers.{name}]"
            try:
                check_name(name)
            except BadRequest as exc:
                raise BadRequest(f"{where}: {exc.message}") from exc
            kind = kind_of(declared.type, where)
            if name in self._builtin and declared.type != name:
                raise BadRequest(f"{where}: {name!r} is a built-in {name} provider; pick another name.")
            file = declared.file.expanduser().resolve() if declared.file is not None else None
            url = check_declaration(
                kind,
                where,
                base_url=declared.base_url,
                api_key_env=declared.api_key_env,
                api_key_secret=declared.api_key_secret,
                model=declared.model,
                file=file,
            )
            self._config[name] = Provider(
                name=name,
                type=kind.type,
                base_url=effective_url(kind, url),
                api_key_secret=declared.api_key_secret,
                api_key_env=declared.api_key_env,
                model=declared.model,
                file=file,
                source="config",
            )

    # -- lookup ----------------------------------------------------------------------------------------------

    def list(self) -> list[Provider]:
        """Built-ins, then config, then stored providers; a name appears once, as it resolves."""
        merged = {**self._builtin, **self._config}
        for row in self._store.list(self._account):
            if row.name not in merged:
                provider = _from_row(row)
                if provider is not None:
                    merged[row.name] = provider
        return list(merged.values())

    def get(self, name: str) -> Provider | None:
        found = self._config.get(name) or self._builtin.get(name)
        if found is not None:
            return found
        row = self._store.get(self._account, name)
        return None if row is None else _from_row(row)

    def default_model(self, name: str) -> str | None:
        """The model of an agent naming this provider without one: its `model`, else for scripted and sampling
        (which take any) the type's name; None when there is neither."""
        provider = self.get(name)
        return (
            None if provider is None else provider.model or (provider.type if provider.type in BUILTIN_TYPES else None)
        )

    def require(self, name: str) -> Provider:
        """The named provider, for an agent definition or a run.

        Raises:
            BadRequest: no provider has that name; the message lists those that exist.
        """
        found = self.get(name)
        if found is None:
            names = ", ".join(p.name for p in self.list())
            raise BadRequest(
                f"No model provider named {name!r}. Providers: {names}. Add one with `mcp-harness provider add` "
                f"or [providers.{name}] in the config."
            )
        return found

    # -- changes ---------------------------------------------------------------------------------------------

    def add(
        self,
        name: str,
        type: str,  # the config's word for it
        *,
        base_url: str | None = None,
        api_key: bytes | None = None,
        api_key_env: str | None = None,
        api_key_secret: str | None = None,
        model: str | None = None,
        file: Path | None = None,
    ) -> Provider:
        """Store a provider; an `api_key` is sealed as secret `provider-<name>` and the row names only the secret.

        Raises:
            BadRequest: the name, type or a setting breaks the type's rules.
            Conflict: the name is built in, declared in the config, or already stored.
        """
        check_name(name)
        where = f"Provider {name!r}"
        kind = kind_of(type, where)
        if name in self._builtin:
            raise Conflict(f"{name!r} is a built-in provider; pick another name.")
        if name in self._config:
            raise Conflict(
                f"{name!r} is declared in the config ([providers.{name}]); edit it there or pick another name."
            )
        if api_key is not None and api_key_secret is not None:
            raise BadRequest(f"{where}: give a key or the name of a secret holding one, not both.")
        key = _clean_key(api_key, where) if api_key is not None else None
        file = file.expanduser().resolve() if file is not None else None
        url = check_declaration(
            kind,
            where,
            base_url=base_url,
            api_key_env=api_key_env,
            api_key_secret=api_key_secret,
            model=model,
            file=file,
        )
        if key is not None and not kind.takes_key:
            raise BadRequest(f"{where}: the {kind.type} type takes no API key.")
        options: dict[str, Any] = {}
        if file is not None:
            options["file"] = str(file)
        if key is not None:
            api_key_secret = secret_name(name)
            options["ownsSecret"] = True
        row = ProviderRow(
            account_id=self._account,
            name=name,
            type=kind.type,
            base_url=url if kind.pinned_url is None else None,
            api_key_secret=api_key_secret,
            api_key_env=api_key_env,
            model=model,
            options=options,
        )
        with self._db.transaction():
            # One atomic change: a refused row leaves no orphan secret, a failed seal leaves no keyless row.
            stored = self._store.insert(row)
            if key is not None:
                self._vault().set(
                    self._account, secret_name(name), key, kind="provider-key", metadata={"provider": name}
                )
        logger.info("added model provider %s (%s)", name, kind.type)
        provider = _from_row(stored)
        assert provider is not None
        return provider

    def users(self, name: str) -> list[str]:
        """Names of the account's agents whose model provider is `name`."""
        agents = self._agents.list(self._account)
        return sorted(a.definition.name for a in agents if a.definition.model_provider == name)

    def delete(self, name: str, *, force: bool = False) -> bool:
        """Delete a stored provider and the secret `add` sealed for it. False when no such row exists.

        Raises:
            BadRequest: the name is built in or declared in the config (and nothing is stored under it).
            Conflict: agents still name it (unless `force`: they then fail until pointed elsewhere).
        """
        row = self._store.get(self._account, name)
        if row is None:
            if name in self._config:
                raise BadRequest(f"Provider {name!r} is declared in the config ([providers.{name}]); remove it there.")
            if name in self._builtin:
                raise BadRequest(f"Provider {name!r} is built in and cannot be deleted.")
            return False
        users = self.users(name)
        if users and not force and name not in self._config:
            raise Conflict(
                f"Provider {name!r} is the model provider of {'agent' if len(users) == 1 else 'agents'} "
                f"{', '.join(users)}; point {'it' if len(users) == 1 else 'them'} elsewhere "
                f"(`mcp-harness agent update NAME --model-provider P`) or pass --force to delete it anyway."
            )
        with self._db.transaction():
            self._store.delete(self._account, name)
            if row.options.get("ownsSecret") and row.api_key_secret:
                self._vault().delete(self._account, row.api_key_secret)
        logger.info("deleted model provider %s", name)
        return True

    # -- keys ------------------------------------------------------------------------------------------------

    def key_source(self, provider: Provider) -> KeySource:
        """Where the key comes from and whether it is there, without reading a secret's value."""
        if provider.api_key_secret is not None:
            present = self._vault().find(self._account, provider.api_key_secret) is not None
            return KeySource(kind="secret", names=(provider.api_key_secret,), available=present)
        envs = _key_envs(provider)
        if not envs:
            return KeySource(kind="none")
        return KeySource(kind="env", names=envs, available=any(os.environ.get(v) for v in envs))

    def api_key(self, provider: Provider) -> str | None:
        """The provider's key from its secret or environment variable; None when it has none. Never log it.

        Raises:
            BadRequest: the provider names a secret that does not exist.
        """
        if provider.api_key_secret is not None:
            try:
                value = self._vault().get_value(self._account, provider.api_key_secret)
            except NotFound as exc:
                raise BadRequest(
                    f"Provider {provider.name!r} takes its key from secret {provider.api_key_secret!r}, which does "
                    f"not exist. Set it with `mcp-harness secret set {provider.api_key_secret}`."
                ) from exc
            return value.decode("utf-8")
        for var in _key_envs(provider):
            value = os.environ.get(var)
            if value:
                return value.strip()
        return None

    def endpoint(self, provider: Provider) -> Endpoint:
        """The URL and key a request to this provider uses.

        Raises:
            BadRequest: a hosted provider has no key (the message says how to give one).
        """
        key = self.api_key(provider) if provider.kind.takes_key else None
        if key is None and provider.kind.key_required:
            envs = " or ".join(_key_envs(provider))
            raise BadRequest(
                f"Provider {provider.name!r} ({provider.type}) has no API key: set {envs}, or store one with "
                f"`mcp-harness provider add NAME --type {provider.type} --api-key-prompt`."
            )
        return Endpoint(provider=provider, base_url=provider.base_url, api_key=key)


def _key_envs(provider: Provider) -> tuple[str, ...]:
    if provider.api_key_env is not None:
        return (provider.api_key_env,)
    return provider.kind.key_envs


def _clean_key(key: bytes, where: str) -> bytes:
    # Keys arrive from stdin or a prompt, usually with a trailing newline; none contains whitespace.
    key = key.strip()
    if not key:
        raise BadRequest(f"{where}: the API key is empty.")
    if len(key) > MAX_KEY_BYTES:
        raise BadRequest(f"{where}: the API key is over {MAX_KEY_BYTES} bytes; is that the right input?")
    try:
        key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"{where}: the API key is not UTF-8 text.") from exc
    return key


def _from_row(row: ProviderRow) -> Provider | None:
    """A stored row as a provider; a row this version cannot use is skipped, with a warning, rather than guessed at."""
    kind = KINDS.get(row.type)
    if kind is None:
        logger.warning("stored model provider %s has unknown type %r; ignoring it", row.name, row.type)
        return None
    if kind.pinned_url is not None and row.base_url and row.base_url != kind.pinned_url:
        # `add` never stores one; a row that has it was edited outside the harness. The pinned URL still applies.
        logger.warning("stored model provider %s has a base_url its type ignores", row.name)
    file = row.options.get("file")
    return Provider(
        name=row.name,
        type=kind.type,
        base_url=effective_url(kind, row.base_url),
        api_key_secret=row.api_key_secret,
        api_key_env=row.api_key_env,
        model=row.model,
        file=Path(file) if isinstance(file, str) else None,
        source="stored",
    )
