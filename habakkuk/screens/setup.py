"""First run: choose a provider, key, model and workspace, or the offline demo.

The screen writes HOME/config.yaml only after the engine's own parser accepts
it, and the key into HOME/.env (mode 0600), never into the config. Mistakes are
shown under the field they concern.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, Select, Static

if TYPE_CHECKING:
    from habakkuk.engine.home import Home

# Known services a new user is likely to have a key for, then local servers.
PROVIDER_CHOICES = [
    ("Anthropic", "anthropic"),
    ("OpenAI", "openai"),
    ("OpenRouter", "openrouter"),
    ("Gemini (via litellm)", "gemini"),
    ("Groq", "groq"),
    ("DeepSeek", "deepseek"),
    ("Mistral", "mistral"),
    ("xAI", "xai"),
    ("Ollama (local, no key)", "ollama"),
    ("LM Studio (local, no key)", "lmstudio"),
    ("vLLM (local, no key)", "vllm"),
    ("llama.cpp server (local, no key)", "llamacpp"),
]
MODEL_HINTS = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-5-mini",
    "openrouter": "anthropic/claude-sonnet-4.5",
    "gemini": "gemini/gemini-2.5-flash",
    "ollama": "llama3.2",
}
AGENT = "habakkuk"


def config_text(provider: str, model: str, workspace: str) -> str:
    """The config the form describes (the provider is named after its preset)."""
    lines = [
        "# Written by the Habakkuk setup screen; `habakkuk doctor` checks it.",
        "providers:",
        f"  {provider}:",
        f"    preset: {provider}",
        "agents:",
        f"  {AGENT}:",
        f'    model: "{provider}/{model}"',
        "    mode: workspace",
    ]
    if workspace:
        escaped = workspace.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'    workspace: "{escaped}"')
    lines += ["    toolsets: [core]", "timezone: UTC", ""]
    return "\n".join(lines)


def merged_env(existing: str, name: str, value: str) -> str:
    """`.env` text with NAME set to value: its line replaced, or appended."""
    out: list[str] = []
    replaced = False
    for line in existing.splitlines():
        bare = line.strip()
        if bare.startswith("export "):
            bare = bare[len("export ") :].lstrip()
        if bare.partition("=")[0].strip() == name:
            if not replaced:
                out.append(f"{name}={value}")
                replaced = True
            continue
        out.append(line)
    if not replaced:
        out.append(f"{name}={value}")
    return "\n".join(out) + "\n"


class SetupScreen(Screen[Path | None]):
    """The first-run form; dismisses with the written config's path."""

    DEFAULT_CSS = """
    SetupScreen VerticalScroll { padding: 0 2; }
    SetupScreen Label { margin-top: 1; text-style: bold; }
    SetupScreen .help { color: $text-muted; }
    SetupScreen .error { color: $text-error; height: auto; }
    SetupScreen Horizontal { height: auto; margin-top: 1; }
    SetupScreen Button { margin-right: 2; }
    """
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="setup.save"),
        Binding("ctrl+o", "demo", "Offline demo", id="setup.demo"),
    ]

    def __init__(self, home: Home) -> None:
        super().__init__(id="setup")
        self.home = home
        self.errors: dict[str, Static] = {
            name: Static("", classes="error", id=f"{name}-error")
            for name in ("provider", "key", "model", "workspace", "config")
        }

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(
                Content.assemble(
                    ("Welcome to Habakkuk. ", "bold"),
                    "Connect a model service, or try the offline demo (no key, no network).",
                )
            )
            yield Label("Provider")
            yield Select(PROVIDER_CHOICES, prompt="Choose a provider", id="provider")
            yield self.errors["provider"]
            yield Label("API key")
            yield Input(
                placeholder="kept in HOME/.env, never in the config", password=True, id="key"
            )
            yield self.errors["key"]
            yield Label("Model")
            yield Input(placeholder="e.g. claude-sonnet-4-5", id="model")
            yield self.errors["model"]
            yield Label("Workspace folder (optional)")
            yield Input(placeholder="default: HOME/agents/habakkuk/workspace", id="workspace")
            yield self.errors["workspace"]
            yield self.errors["config"]
            with Horizontal():
                yield Button("Save and start", id="save", variant="primary")
                yield Button("Offline demo", id="demo")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        for error in self.errors.values():
            error.display = False
        self.query_one("#provider", Select).focus()

    def on_select_changed(self, event: Select.Changed) -> None:
        hint = MODEL_HINTS.get(str(event.value))
        if hint:
            self.query_one("#model", Input).placeholder = f"e.g. {hint}"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        elif event.button.id == "demo":
            self.action_demo()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.focus_next()

    def _error(self, field: str, message: str) -> None:
        widget = self.errors[field]
        widget.update(Content(message))
        widget.display = bool(message)

    def validate(self) -> str | None:
        """Check the form; show each problem under its field; the config text when all is well."""
        from habakkuk.engine.config import parse_config
        from habakkuk.engine.errors import ConfigError
        from habakkuk.engine.presets import PRESETS

        for field in self.errors:
            self._error(field, "")
        provider_value = self.query_one("#provider", Select).value
        key = self.query_one("#key", Input).value.strip()
        model = self.query_one("#model", Input).value.strip()
        workspace = self.query_one("#workspace", Input).value.strip()
        ok = True
        provider = provider_value if isinstance(provider_value, str) else ""
        preset = PRESETS.get(provider)
        if preset is None:
            self._error("provider", "Choose a provider (or press Ctrl+O for the offline demo).")
            ok = False
        elif not key and not preset.key_optional:
            self._error("key", f"{provider} needs an API key (saved as {preset.key_env} in .env).")
            ok = False
        if key and (any(c.isspace() for c in key) or any(c in key for c in "\"'#")):
            self._error("key", "The key has spaces, quotes or #: paste only the key itself.")
            ok = False
        if not model:
            self._error("model", "Name the model, e.g. " + MODEL_HINTS.get(provider, "gpt-5-mini"))
            ok = False
        elif any(c.isspace() for c in model) or '"' in model:
            self._error("model", "A model name has no spaces or quotes.")
            ok = False
        if workspace:
            path = Path(workspace).expanduser()
            if path.exists() and not path.is_dir():
                self._error("workspace", f"{path} exists and is not a folder.")
                ok = False
        if not ok:
            return None
        text = config_text(provider, model, workspace)
        try:
            parse_config(text, self.home.config_path, self.home)
        except ConfigError as exc:
            self._error("config", str(exc))
            return None
        return text

    def action_save(self) -> None:
        """Write the config (and the key) when the form is valid."""
        text = self.validate()
        if text is None:
            return
        provider = str(self.query_one("#provider", Select).value)
        key = self.query_one("#key", Input).value.strip()
        self._write(text, provider, key)

    def action_demo(self) -> None:
        """Write the commented starter config: the offline demo with the mock provider."""
        from habakkuk.commands import STARTER_CONFIG

        self._write(STARTER_CONFIG, "", "")

    @work(exclusive=True, group="write")
    async def _write(self, text: str, provider: str, key: str) -> None:
        from habakkuk.engine.home import write_private_file
        from habakkuk.engine.presets import PRESETS

        home = self.home

        def write() -> None:
            home.prepare()
            if key and provider in PRESETS and PRESETS[provider].key_env:
                env_name = str(PRESETS[provider].key_env)
                existing = (
                    home.env_path.read_text(encoding="utf-8") if home.env_path.exists() else ""
                )
                write_private_file(home.env_path, merged_env(existing, env_name, key))
            write_private_file(home.config_path, text)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:
            self._error("config", f"{home.root}: cannot write: {exc.strerror}")
            return
        self.dismiss(home.config_path)
