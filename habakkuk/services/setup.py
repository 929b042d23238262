"""Setting up a provider: what `habakkuk setup` (habakkuk.cli.setup) and the app's setup
screen (habakkuk.screens.setup) share, below both of them.

The provider choices (`CHOICES`: Anthropic, OpenAI, OpenRouter, any OpenAI-compatible
server, Google Gemini, or the offline demo), the key check (`check_key`: one
cheap request, the model list, and on a failure why in one line), and the config
building and writing (`ProviderSetup`, used through `SetupAccess`): the key goes to the
OS keyring when one is usable and otherwise to HOME/.env (mode 0600, other lines kept);
the config is built on the existing one, keeping the rest of it, validated with the
real config loader before anything is written, and the previous file is kept as
config.yaml.bak.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home, read_text_file, write_private_file

AGENT = "habakkuk"


LITELLM_HINT = "needs `pip install 'habakkuk[litellm]'`"
CHECK_TIMEOUT = 10.0  # seconds for the key check's one request


@dataclass(frozen=True)
class Choice:
    """One provider the wizard and the setup screen offer."""

    label: str
    name: str  # the provider's name in config
    provider: dict[str, Any]  # its config section
    key_env: str | None  # where the key goes (None: no key)
    key_optional: bool
    default_model: str
    asks_base_url: bool = False  # any OpenAI-compatible server: the user gives its URL
    needs_module: str = ""  # a module its adapter imports that may not be installed

    @property
    def missing(self) -> str:
        """What this choice needs that is not installed ("" when it can work here)."""
        if self.needs_module and importlib.util.find_spec(self.needs_module) is None:
            return LITELLM_HINT
        return ""

    @property
    def title(self) -> str:
        """The label, with what is missing when something is."""
        return f"{self.label} ({self.missing})" if self.missing else self.label

    @property
    def is_demo(self) -> bool:
        return self.provider.get("type") == "mock"


CHOICES: list[Choice] = [
    Choice(
        "Anthropic (Claude)",
        "anthropic",
        {"type": "anthropic", "key_env": "ANTHROPIC_API_KEY"},
        "ANTHROPIC_API_KEY",
        False,
        "claude-sonnet-4-6",
    ),
    Choice(
        "OpenAI",
        "openai",
        {"type": "openai", "key_env": "OPENAI_API_KEY"},
        "OPENAI_API_KEY",
        False,
        "gpt-5.4-mini",
    ),
    Choice(
        "OpenRouter (many models, one key)",
        "openrouter",
        {"preset": "openrouter"},
        "OPENROUTER_API_KEY",
        False,
        "anthropic/claude-sonnet-4.6",
    ),
    Choice(
        "Any OpenAI-compatible server (Ollama, LM Studio, vLLM, a gateway, ...)",
        "custom",
        {"type": "openai"},
        "CUSTOM_API_KEY",
        True,
        "",
        asks_base_url=True,
    ),
    Choice(
        "Google Gemini",
        "gemini",
        {"preset": "gemini"},
        "GEMINI_API_KEY",
        False,
        "gemini-2.5-flash",
    ),
    Choice(
        "Amazon Bedrock (AWS credentials, or a Bedrock API key)",
        "bedrock",
        {"preset": "bedrock"},
        "AWS_BEARER_TOKEN_BEDROCK",
        True,  # blank: the AWS credential chain (AWS_PROFILE, ~/.aws, SSO, roles)
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ),
    Choice("The offline demo (no key, no network)", "demo", {"type": "mock"}, None, True, "tour"),
]
CHOICES_BY_NAME = {choice.name: choice for choice in CHOICES}
GEMINI_URL = "https://generativelanguage.googleapis.com"


@dataclass(frozen=True)
class KeyCheck:
    """How the key check went: `ok`, else `reason` says why (one line)."""

    ok: bool
    reason: str = ""


def _adapter_type(choice: Choice) -> tuple[str, str | None]:
    """The choice's adapter type and preset base URL."""
    from habakkuk.engine.presets import PRESETS

    preset = PRESETS.get(str(choice.provider.get("preset", "")))
    kind = str(choice.provider.get("type") or (preset.type if preset else ""))
    return kind, preset.base_url if preset else None


async def check_key(
    choice: Choice, key: str, base_url: str | None = None, *, timeout: float = CHECK_TIMEOUT
) -> KeyCheck:
    """Try the key with one cheap request (list the models) against the provider's URL.

    `base_url` is the OpenAI-compatible server's (else the preset's, else the SDK's
    default, which honours ANTHROPIC_BASE_URL and OPENAI_BASE_URL). No retries.
    """
    if choice.is_demo:
        return KeyCheck(True)
    if choice.missing:
        return KeyCheck(False, f"{choice.label} {choice.missing}")
    kind, preset_url = _adapter_type(choice)
    url = base_url or preset_url
    try:
        if kind == "anthropic":
            import anthropic

            client = anthropic.AsyncAnthropic(
                api_key=key, base_url=url, max_retries=0, timeout=timeout
            )
            url = str(client.base_url)
            async with client:
                await client.models.list(limit=1)
        elif kind in ("gemini", "litellm"):
            await _check_gemini(key, url or GEMINI_URL, timeout)
        elif kind == "bedrock":
            return await _check_bedrock(key, url)
        else:
            import openai

            oai = openai.AsyncOpenAI(
                api_key=key or "none", base_url=url, max_retries=0, timeout=timeout
            )
            url = str(oai.base_url)
            async with oai:
                if choice.name == "openrouter":
                    # Its model list is public: only /key says whether the key is good.
                    await oai.get("/key", cast_to=object)
                else:
                    await oai.models.list()
    except Exception as exc:  # every failure becomes the reason shown to the user
        return KeyCheck(False, _why(exc, url or "the provider"))
    return KeyCheck(True)


async def _check_gemini(key: str, url: str, timeout: float) -> None:
    import aiohttp

    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as client,
        client.get(f"{url.rstrip('/')}/v1beta/models", headers={"x-goog-api-key": key}) as reply,
    ):
        reply.raise_for_status()


async def _check_bedrock(key: str, url: str | None) -> KeyCheck:
    """Bedrock has no cheap call to try: the key, or credentials from the AWS chain, and a
    region must be found (bedrock_auth.check; no request is made)."""
    import asyncio

    from habakkuk.engine.llm.adapters.bedrock_auth import check

    reason = await asyncio.to_thread(check, key or None, None, url)
    return KeyCheck(not reason, reason)


def _why(exc: Exception, url: str) -> str:
    """A failed check in one line: refused key, unreachable server, or the status."""
    import aiohttp
    import anthropic
    import openai

    text = " ".join(str(exc).split())[:200]
    if isinstance(exc, openai.AuthenticationError | anthropic.AuthenticationError):
        return "the key was refused (401: not a valid key for this provider)"
    if isinstance(exc, openai.PermissionDeniedError | anthropic.PermissionDeniedError):
        return "the key has no access (403)"
    if isinstance(exc, openai.APITimeoutError | anthropic.APITimeoutError | TimeoutError):
        return f"no answer from {url} in time"
    if isinstance(exc, aiohttp.ClientResponseError):
        refused = exc.status in (400, 401, 403)
        return "the key was refused" if refused else f"HTTP {exc.status} from {url}"
    if isinstance(exc, openai.APIConnectionError | anthropic.APIConnectionError):
        cause = " ".join(str(exc.__cause__ or "").split())
        return f"cannot reach {url}" + (f" ({cause[:160]})" if cause else "")
    if isinstance(exc, aiohttp.ClientError):
        return f"cannot reach {url} ({text or type(exc).__name__})"
    if isinstance(exc, openai.APIStatusError | anthropic.APIStatusError):
        return f"HTTP {exc.status_code} from {url}: {text}"
    return f"{type(exc).__name__}: {text}"


class SetupAccess(Protocol):
    """What `habakkuk setup` and the setup screen use to save a provider for a home."""

    def build_config(
        self, choice: Choice, base_url: str | None, key_set: bool, model: str, workspace: str
    ) -> str:
        """The new config text: the old config's other settings kept, validated."""
        ...

    def store_key(self, variable: str, key: str) -> str:
        """Put the key in the keyring if usable, else HOME/.env; returns where it went."""
        ...

    def write_env(self, variable: str, value: str | None) -> None:
        """Set (or, with None, drop) one variable in HOME/.env, other lines kept (0600)."""
        ...

    def write_config(self, text: str, *, backup: bool = True) -> None:
        """Keep the old file as config.yaml.bak (unless `backup` is False) and write the
        new one (0600)."""
        ...


class ProviderSetup:
    """The config building and writing for one home (a SetupAccess); `out` hears what it
    changed on its own (a demo's pinned toolsets dropped, an invalid old config replaced)."""

    def __init__(self, home: Home, out: Callable[[str], None] = print) -> None:
        self.home = home
        self.out = out

    def build_config(
        self, choice: Choice, base_url: str | None, key_set: bool, model: str, workspace: str
    ) -> str:
        """The new config text: the old config's other settings kept, validated."""
        import yaml

        from habakkuk.engine.config import parse_config

        provider = dict(choice.provider)
        if base_url:
            provider["base_url"] = base_url
        if choice.asks_base_url and key_set and choice.key_env:
            provider["key_env"] = choice.key_env
        agent = {"model": f"{choice.name}/{model}", "mode": "workspace", "workspace": workspace}
        old = self._old_config()
        data: dict[str, Any] = old if old is not None else {}
        providers = data.get("providers")
        data["providers"] = providers if isinstance(providers, dict) else {}
        data["providers"][choice.name] = provider
        agents = data.get("agents")
        data["agents"] = agents if isinstance(agents, dict) else {}
        existing = data["agents"].get(AGENT)
        if isinstance(existing, dict):
            existing.pop("fallbacks", None)  # they may name a provider that is gone
            if self._starter_pinned_toolsets(existing):
                del existing["toolsets"]
                self.out(
                    "  toolsets: the demo's [core, memory] removed: the agent gets the default"
                )
            existing.update(agent)
        else:
            data["agents"][AGENT] = agent
        data["default_agent"] = AGENT
        text = "# Written by `habakkuk setup`; the previous file is config.yaml.bak.\n"
        text += yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        try:
            parse_config(text, self.home.config_path, self.home)
        except ConfigError as exc:
            if old is None:
                raise
            # The old file had problems of its own: start from a clean one.
            self.out(f"  (the old config does not validate: {exc}; writing a fresh one)")
            fresh = {
                "providers": {choice.name: provider},
                "agents": {AGENT: agent},
                "default_agent": AGENT,
            }
            text = "# Written by `habakkuk setup`; the previous file is config.yaml.bak.\n"
            text += yaml.safe_dump(fresh, sort_keys=False, allow_unicode=True)
            parse_config(text, self.home.config_path, self.home)
        return text

    def _starter_pinned_toolsets(self, agent: dict[str, Any]) -> bool:
        """Whether the agent's `toolsets:` is the old starter config's pin, never the user's
        choice: the list is [core, memory] and the file still has the starter's line."""
        from habakkuk.engine.starter import has_old_starter_pin

        if agent.get("toolsets") != ["core", "memory"]:
            return False
        try:
            return has_old_starter_pin(self.home.config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return False

    def _old_config(self) -> dict[str, Any] | None:
        import yaml

        try:
            data = yaml.safe_load(read_text_file(self.home.config_path))
        except (OSError, yaml.YAMLError, ConfigError):  # unreadable: a fresh config replaces it
            return None
        return data if isinstance(data, dict) else None

    def store_key(self, variable: str, key: str) -> str:
        """Put the key in the keyring if usable, else HOME/.env; returns where it went."""
        from habakkuk.engine.llm.keys import keyring_set

        if keyring_set(variable, key):
            # A stale .env line would win over the keyring: drop it.
            self.write_env(variable, None)
            return "the OS keyring"
        self.write_env(variable, key)
        return str(self.home.env_path)

    def write_env(self, variable: str, value: str | None) -> None:
        """Set (or, with None, drop) one variable in HOME/.env, other lines kept (0600)."""
        path = self.home.env_path
        try:
            lines = read_text_file(path).splitlines()  # ConfigError when not UTF-8
        except FileNotFoundError:
            if value is None:
                return
            lines = []
        kept: list[str] = []
        for line in lines:
            bare = line.strip()
            if bare.startswith("export "):
                bare = bare[len("export ") :].lstrip()
            if bare.partition("=")[0].strip() == variable:
                continue
            kept.append(line)
        if value is not None:
            kept.append(f"{variable}={_quote(value)}")
        if value is None and kept == lines:
            return
        write_private_file(path, "\n".join(kept) + "\n" if kept else "")

    def write_config(self, text: str, *, backup: bool = True) -> None:
        """Keep the old file as config.yaml.bak (unless `backup` is False: a later step of
        the same `habakkuk setup`, whose first write kept the person's file there) and write
        the new one (0600)."""
        self.home.prepare()
        path = self.home.config_path
        if path.exists() and backup:
            kept = path.with_name("config.yaml.bak")
            kept.write_bytes(path.read_bytes())
            os.chmod(kept, 0o600)
        write_private_file(path, text)


def _quote(value: str) -> str:
    if any(ch in value for ch in " #\"'\t") or value != value.strip():
        return '"' + value.replace('"', '\\"') + '"'
    return value
