"""Builds provider adapters from config, lazily, and hands the router keys.

SDKs are imported only when a provider of that type is first used, so
`habakkuk --help` and the mock-only demo never pay for them.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ..config import Config, ModelRef, ProviderConfig
from ..errors import ConfigError
from ..home import Environment
from . import keys as keystore
from .keys import KeyRotation
from .mock import MockProvider, load_script_file, parse_script
from .provider import Provider, ProviderError

ADAPTER_MODULES = {
    "anthropic": "habakkuk.engine.llm.adapters.anthropic",
    "openai": "habakkuk.engine.llm.adapters.openai_chat",
    "responses": "habakkuk.engine.llm.adapters.responses",
    "litellm": "habakkuk.engine.llm.adapters.litellm",
}


def build_provider(config: ProviderConfig, home_root: Path) -> Provider:
    """One adapter for one configured provider."""
    if config.type == "mock":
        raw = config.script
        where = f"providers.{config.name}.script"
        if config.script_file:
            path = Path(config.script_file).expanduser()
            if not path.is_absolute():
                path = home_root / path
            raw = load_script_file(path)
            where = str(path)
        return MockProvider(config.name, parse_script(raw, where), tour=not raw)
    module_name = ADAPTER_MODULES.get(str(config.type))
    if module_name is None:
        raise ConfigError(f"providers.{config.name}: unknown type {config.type!r}")
    module = importlib.import_module(module_name)
    provider: Provider = module.create(config)
    return provider


class ProviderHub:
    """The router's source of providers and keys for one config.

    Keys come from the environment (then HOME/.env), else from the OS keyring
    where `habakkuk setup` may have stored them; several key variables rotate
    with per-key cooldowns fed by `report`.
    """

    def __init__(self, config: Config, env: Environment, home_root: Path):
        self.config = config
        self.env = env
        self.home_root = home_root
        self._providers: dict[str, Provider] = {}
        self.rotation = KeyRotation()
        self._keyring: dict[str, str | None] | None = None

    def provider(self, ref: ModelRef) -> Provider:
        cached = self._providers.get(ref.provider)
        if cached is None:
            provider_config = self.config.providers.get(ref.provider)
            if provider_config is None:
                raise ProviderError("bad_request", f"provider {ref.provider!r} is not configured")
            cached = build_provider(provider_config, self.home_root)
            self._providers[ref.provider] = cached
        return cached

    def _missing_vars(self) -> list[str]:
        return [
            var
            for provider in self.config.providers.values()
            for var in provider.key_vars
            if not self.env.get(var)
        ]

    def load_keyring(self) -> None:
        """Read keyring entries for key variables the environment lacks (blocking: run
        it off the event loop). Without this, the first key lookup does it."""
        missing = self._missing_vars()
        found: dict[str, str | None] = {}
        if missing:
            backend = keystore.keyring_backend()
            for var in missing:
                found[var] = keystore.keyring_get(var, backend) if backend is not None else None
        self._keyring = found

    def keys(self, ref: ModelRef) -> list[str]:
        """Every key configured for the provider, in rotation order (duplicates dropped)."""
        provider_config = self.config.providers.get(ref.provider)
        if provider_config is None:
            return []
        values: list[str] = []
        for var in provider_config.key_vars:
            value = self.env.get(var)
            if not value:
                if self._keyring is None:
                    self.load_keyring()
                assert self._keyring is not None
                value = self._keyring.get(var)
            if value and value not in values:
                values.append(value)
        return values

    def key(self, ref: ModelRef) -> str | None:
        return self.rotation.pick(ref.provider, self.keys(ref))

    def report(self, ref: ModelRef, key: str | None, error: ProviderError | None) -> None:
        """Outcome of a call with `key`: rate-limit and auth failures cool the key down."""
        self.rotation.report(ref.provider, key, error)

    async def aclose(self) -> None:
        """Close the adapters' SDK clients (their connection pools)."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
