"""`habakkuk setup`: an interactive first-run (or re-run) wizard, and what it shares with
the app's setup screen: the provider choices (`CHOICES`), the key check (`check_key`)
and the config building and writing (`Wizard.build_config`, `write_config`).

It asks for the provider (Anthropic, OpenAI, OpenRouter, any OpenAI-compatible
server, Gemini through litellm, or the offline demo), the key (hidden input),
checks the key with one cheap request (the model list) and on a failure says why
and offers to save anyway or retry, then asks for the model and the
workspace; stores the key in the OS keyring when one is usable and otherwise
in HOME/.env (mode 0600, other lines kept); builds the config, keeping the
rest of an existing one, validates it with the real config loader before
writing anything, and keeps the previous file as config.yaml.bak. The
command then runs `habakkuk doctor`.
"""

from __future__ import annotations

import asyncio
import getpass
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.errors import ConfigError
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK
from habakkuk.engine.home import Home, read_text_file, write_private_file

Ask = Callable[[str], str]

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
        "Gemini (via litellm)",
        "gemini",
        {"preset": "gemini"},
        "GEMINI_API_KEY",
        False,
        "gemini/gemini-2.5-flash",
        needs_module="litellm",
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
        elif kind == "litellm":
            await _check_gemini(key, url or GEMINI_URL, timeout)
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


class SetupAborted(Exception):
    """The user ended input (EOF) or gave up on a question."""


class Wizard:
    """The questions and the writing, with input functions that tests can replace."""

    def __init__(
        self,
        home: Home,
        ask: Ask | None = None,
        ask_secret: Ask | None = None,
        out: Callable[[str], None] | None = None,
    ):
        self.home = home
        self.ask = ask or input
        self.ask_secret = ask_secret or getpass.getpass
        self.out = out or print

    # -- questions -----------------------------------------------------------------------

    def _prompt(self, question: str, default: str = "", secret: bool = False) -> str:
        suffix = f" [{default}]" if default else ""
        try:
            answer = (self.ask_secret if secret else self.ask)(f"{question}{suffix}: ")
        except EOFError:
            raise SetupAborted("input ended") from None
        return answer.strip() or default

    def choose_provider(self) -> Choice:
        """Ask which provider until the answer is one of the numbers."""
        self.out("Which model provider?")
        for number, choice in enumerate(CHOICES, start=1):
            self.out(f"  {number}. {choice.title}")
        for _ in range(5):
            answer = self._prompt("Provider number", "1")
            if answer.isdigit() and 1 <= int(answer) <= len(CHOICES):
                choice = CHOICES[int(answer) - 1]
                if choice.missing:
                    self.out(f"  {choice.label} {choice.missing}; choose another or install it")
                    continue
                return choice
            self.out(f"  please answer a number from 1 to {len(CHOICES)}")
        raise SetupAborted("no provider chosen")

    def ask_base_url(self) -> str:
        """The URL of an OpenAI-compatible server (ending in /v1 as a rule)."""
        for _ in range(5):
            url = self._prompt("Server URL (e.g. http://127.0.0.1:11434/v1)")
            if url.startswith(("http://", "https://")) and len(url) > len("https://"):
                return url.rstrip("/")
            self.out("  please give an http:// or https:// URL")
        raise SetupAborted("no server URL given")

    def ask_key(self, choice: Choice) -> str:
        """The key (hidden); optional servers accept an empty answer."""
        hint = " (Enter for none)" if choice.key_optional else ""
        for _ in range(5):
            key = self._prompt(f"API key{hint} (input is hidden)", secret=True)
            if key or choice.key_optional:
                return key
            self.out("  this provider needs a key")
        raise SetupAborted("no key given")

    def checked_key(self, choice: Choice, base_url: str | None) -> str:
        """Ask for the key and check it; on a failure say why, then save anyway or retry."""
        for _ in range(5):
            key = self.ask_key(choice) if choice.key_env else ""
            if choice.is_demo:
                return key
            self.out("  checking the key (listing the models)...")
            result = asyncio.run(check_key(choice, key, base_url))
            if result.ok:
                self.out("  the key works")
                return key
            self.out(f"  the check failed: {result.reason}")
            answer = self._prompt("Save it anyway? (y: save, n: enter the key again)", "n")
            if answer.lower() in ("y", "yes"):
                return key
        raise SetupAborted("no working key given")

    def ask_model(self, choice: Choice) -> str:
        for _ in range(5):
            model = self._prompt("Model", choice.default_model)
            if model and not model.startswith("/") and " " not in model:
                return model
            self.out("  please give a model id, e.g. " + (choice.default_model or "llama3.1"))
        raise SetupAborted("no model given")

    def ask_workspace(self) -> str:
        default = str(self.home.default_workspace(AGENT))
        for _ in range(5):
            answer = self._prompt("Workspace folder for the agent", default)
            path = Path(answer).expanduser()
            if path.exists() and not path.is_dir():
                self.out(f"  {path} is a file, not a folder")
                continue
            return str(path if path.is_absolute() else Path.cwd() / path)
        raise SetupAborted("no workspace given")

    # -- building and writing ------------------------------------------------------------

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

    def write_config(self, text: str) -> None:
        """Keep the old file as config.yaml.bak and write the new one (0600)."""
        self.home.prepare()
        path = self.home.config_path
        if path.exists():
            backup = path.with_name("config.yaml.bak")
            backup.write_bytes(path.read_bytes())
            os.chmod(backup, 0o600)
        write_private_file(path, text)

    # -- the whole run -------------------------------------------------------------------

    def run(self) -> int:
        """Ask, validate, store and write; returns an exit code."""
        self.out(f"Setting up Habakkuk in {self.home.root}\n")
        choice = self.choose_provider()
        base_url = self.ask_base_url() if choice.asks_base_url else None
        key = self.checked_key(choice, base_url)
        model = self.ask_model(choice)
        workspace = self.ask_workspace()
        text = self.build_config(choice, base_url, bool(key), model, workspace)
        if key and choice.key_env:
            where = self.store_key(choice.key_env, key)
            self.out(f"stored {choice.key_env} in {where}")
            current = os.environ.get(choice.key_env)
            if current and current != key:
                self.out(
                    f"note: {choice.key_env} is also set in your environment, and that value "
                    "wins; unset it to use the new key"
                )
        self.write_config(text)
        Path(workspace).mkdir(parents=True, exist_ok=True)
        self.out(f"wrote {self.home.config_path}")
        return EXIT_OK


def _quote(value: str) -> str:
    if any(ch in value for ch in " #\"'\t") or value != value.strip():
        return '"' + value.replace('"', '\\"') + '"'
    return value


def run_setup(home: Home, ask: Ask | None = None, ask_secret: Ask | None = None) -> int:
    """Run the wizard on `home`; a user who ends input gets a one-line message."""
    wizard = Wizard(home, ask, ask_secret)
    try:
        return wizard.run()
    except SetupAborted as exc:
        print(f"habakkuk: setup: stopped ({exc}); nothing was written", file=sys.stderr)
        return EXIT_FAILED
