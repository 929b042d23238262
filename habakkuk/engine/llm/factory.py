"""Builds provider adapters from config, lazily, and hands the router keys.

SDKs are imported only when a provider of that type is first used, so
`habakkuk --help` and the mock-only demo never pay for them.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config, ModelRef, ProviderConfig
from ..errors import ConfigError
from ..home import Environment
from . import keys as keystore
from .keys import KeyRotation
from .mock import MockProvider, load_script_file, parse_script
from .provider import Provider, ProviderError

if TYPE_CHECKING:
    from .logins.services import Logins

log = logging.getLogger(__name__)

ADAPTER_MODULES = {
    "anthropic": "habakkuk.engine.llm.adapters.anthropic",
    "openai": "habakkuk.engine.llm.adapters.openai_chat",
    "responses": "habakkuk.engine.llm.adapters.responses",
    "litellm": "habakkuk.engine.llm.adapters.litellm",
    "bedrock": "habakkuk.engine.llm.adapters.bedrock",
    "gemini": "habakkuk.engine.llm.adapters.gemini",
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
        if config.secrets.resolved:
            from ..secrets import attach_secrets  # secrets.refs: read between env and .env

            attach_secrets(env, config)
        self._providers: dict[str, Provider] = {}
        self.rotation = KeyRotation()
        self._keyring: dict[str, str | None] | None = None
        self._keyring_read = threading.Lock()  # warm's thread may read it as open does
        self._warming: list[asyncio.Future[None]] = []  # warm's worker-thread runs
        self._logins: Logins | None = None  # the `auth:` providers' credentials, when used

    def provider(self, ref: ModelRef) -> Provider:
        cached = self._providers.get(ref.provider)
        if cached is None:
            provider_config = self.config.providers.get(ref.provider)
            if provider_config is None:
                raise ProviderError("bad_request", f"provider {ref.provider!r} is not configured")
            if provider_config.auth is not None:
                from .logins.adapters import create

                cached = create(provider_config, self.logins().login(provider_config.auth))
            else:
                cached = build_provider(provider_config, self.home_root)
            self._providers[ref.provider] = cached
        return cached

    def logins(self) -> Logins:
        """The subscription logins' credentials (made on first use)."""
        if self._logins is None:
            from .logins.services import Logins

            self._logins = Logins(self.config.auth, self.home_root)
        return self._logins

    async def token(self, ref: ModelRef) -> str | None:
        """A login provider's token for the next attempt (llm/credentials.py); None for a
        provider with keys."""
        provider_config = self.config.providers.get(ref.provider)
        if provider_config is None or provider_config.auth is None:
            return None
        return await self.logins().login(provider_config.auth).token()

    def _missing_vars(self) -> list[str]:
        return [
            var
            for provider in self.config.providers.values()
            for var in provider.key_vars
            if not self.env.get(var)
        ]

    def prefetch_secrets(self) -> None:
        """Read every `secrets.refs` value now (blocking: run it off the event loop)."""
        from ..secrets import SecretStore

        if isinstance(self.env.secrets, SecretStore):
            self.env.secrets.prefetch()

    def load_keyring(self) -> None:
        """Read keyring entries for key variables the environment lacks, once (blocking:
        run it off the event loop). Without this, the first key lookup does it."""
        with self._keyring_read:
            if self._keyring is not None:
                return
            missing = self._missing_vars()
            found: dict[str, str | None] = {}
            if missing:
                backend = keystore.keyring_backend()
                for var in missing:
                    found[var] = keystore.keyring_get(var, backend) if backend is not None else None
            self._keyring = found

    def keyring_values(self) -> list[str]:
        """The keys read from the OS keyring (for the redactor), once load_keyring ran."""
        return [value for value in (self._keyring or {}).values() if value]

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

    def warm(self, refs: Iterable[ModelRef]) -> None:
        """Start making, on a worker thread, the SDK clients the first calls to `refs` will
        use (with the key the router would pick), so a turn about to start does not wait
        there for the SDK's import and client: a third of a second of a one-shot
        `habakkuk run` for openai. The adapters are built here, on the caller's thread
        (their modules import no SDK); the mock has nothing to make. Best effort: what
        fails here (no key, no SDK installed) fails again in the call, which reports it.
        Called with the event loop running."""
        steps: list[Callable[[], None]] = []
        for ref in refs:
            try:
                provider = self.provider(ref)
            except Exception as exc:  # the call that needs it reports it
                log.debug("not warming %s: %s", ref, exc)
                continue
            make: Callable[[str | None], None] | None = getattr(provider, "warm", None)
            if make is not None:
                # The key is looked up on the thread too: it may read the OS keyring.
                steps.append(functools.partial(_make_client, make, self.key, ref))
        if steps:  # submitted now: the caller's next lines run synchronously (imports)
            loop = asyncio.get_running_loop()
            self._warming.append(loop.run_in_executor(None, _warm_all, steps))

    def warm_first(self, agent: str | None, choice: ModelRef | None = None) -> None:
        """`warm` the model a turn of `agent` (None: the default agent) calls first: the
        session's /model `choice` while its provider is configured, else the agent's own
        model (as the turn's chain has it). Nothing for an agent that is not configured
        (the session's creation says so)."""
        if choice is None or choice.provider not in self.config.providers:
            try:
                chain = self.config.agent(agent).chain
            except ConfigError:
                return
            choice = chain[0] if chain else None
        if choice is not None:
            self.warm([choice])

    async def warmed(self) -> None:
        """Wait until what `warm` started is done (at once when nothing is)."""
        while self._warming:
            warming, self._warming = self._warming, []
            await asyncio.gather(*warming)

    async def aclose(self) -> None:
        """Close the adapters' SDK clients (their connection pools), once any client
        `warm` is still making is made."""
        await self.warmed()
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()


def _make_client(
    make: Callable[[str | None], None], key: Callable[[ModelRef], str | None], ref: ModelRef
) -> None:
    make(key(ref))


def _warm_all(steps: list[Callable[[], None]]) -> None:
    """Run `ProviderHub.warm`'s steps (on its worker thread); a failure is only logged."""
    for step in steps:
        try:
            step()
        except Exception as exc:  # the call itself meets it again and reports it
            log.debug("warming a model client failed: %s", exc)
