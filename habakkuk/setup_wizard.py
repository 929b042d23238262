"""`habakkuk setup`: an interactive first-run (or re-run) wizard.

It asks for the provider (Anthropic, OpenAI, OpenRouter, any OpenAI-compatible
server, or the offline demo), the key (hidden input), the model and the
workspace; stores the key in the OS keyring when one is usable and otherwise
in HOME/.env (mode 0600, other lines kept); builds the config, keeping the
rest of an existing one, validates it with the real config loader before
writing anything, and keeps the previous file as config.yaml.bak. The
command then runs `habakkuk doctor`.
"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home, write_private_file

Ask = Callable[[str], str]

EXIT_OK = 0
EXIT_FAILED = 1
AGENT = "habakkuk"


@dataclass(frozen=True)
class Choice:
    """One provider the wizard offers."""

    label: str
    name: str  # the provider's name in config
    provider: dict[str, Any]  # its config section
    key_env: str | None  # where the key goes (None: no key)
    key_optional: bool
    default_model: str


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
    ),
    Choice("The offline demo (no key, no network)", "demo", {"type": "mock"}, None, True, "tour"),
]


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
            self.out(f"  {number}. {choice.label}")
        for _ in range(5):
            answer = self._prompt("Provider number", "1")
            if answer.isdigit() and 1 <= int(answer) <= len(CHOICES):
                return CHOICES[int(answer) - 1]
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
        if choice.name == "custom" and key_set and choice.key_env:
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

    def _old_config(self) -> dict[str, Any] | None:
        import yaml

        try:
            text = self.home.config_path.read_text(encoding="utf-8")
            data = yaml.safe_load(text)
        except (OSError, yaml.YAMLError):
            return None
        return data if isinstance(data, dict) else None

    def store_key(self, variable: str, key: str) -> str:
        """Put the key in the keyring if usable, else HOME/.env; returns where it went."""
        from habakkuk.engine.llm.keys import keyring_set

        if keyring_set(variable, key):
            # A stale .env line would win over the keyring: drop it.
            self._write_env(variable, None)
            return "the OS keyring"
        self._write_env(variable, key)
        return str(self.home.env_path)

    def _write_env(self, variable: str, value: str | None) -> None:
        path = self.home.env_path
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
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
        base_url = self.ask_base_url() if choice.name == "custom" else None
        key = self.ask_key(choice) if choice.key_env else ""
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
