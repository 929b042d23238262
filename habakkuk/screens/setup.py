"""Setup: choose a provider, key, model and workspace, or the offline demo.

The choices, the key check and the config building are `habakkuk setup`'s too
(habakkuk.services.setup, below both): the same providers (an OpenAI-compatible
server asks for its URL; a choice says when an extra it needs is missing), the key tried with
one cheap request before saving (a failure says why; Save again saves anyway), and
the config built on the existing one, whose other providers (the demo) and agents
are kept. The config is written only after the engine's own parser accepts it,
the key into HOME/.env (mode 0600), never into the config. Mistakes are shown
under the field they concern. The palette's "Setup: providers" opens it again.
"Add a chat channel" opens the channel form (habakkuk.screens.channel_setup).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, Input, Label, Select, Static

from habakkuk.engine.i18n import t
from habakkuk.services.setup import AGENT, CHOICES, CHOICES_BY_NAME, Choice
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.engine.home import Home

FIELDS = ("provider", "base-url", "key", "model", "workspace", "config")


@dataclass(frozen=True)
class Plan:
    """What the form asks to save (compared to know whether the key was checked)."""

    choice: Choice
    base_url: str | None
    key: str
    model: str
    workspace: str


class SetupScreen(Screen[Path | None]):
    """The setup form; dismisses with the written config's path."""

    DEFAULT_CSS = """
    SetupScreen VerticalScroll { padding: 0 2; }
    SetupScreen Label { margin-top: 1; text-style: bold; }
    SetupScreen .help { color: $text-muted; }
    SetupScreen .error { color: $text-error; height: auto; }
    SetupScreen #check { color: $text-muted; height: auto; }
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
            name: Static("", classes="error", id=f"{name}-error") for name in FIELDS
        }
        self._check = Static("", id="check")
        # The plan whose key check failed: saving it again saves anyway.
        self.unchecked: Plan | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(
                Content.assemble(
                    (t("tui.setup.welcome"), "bold"),
                    t("tui.setup.intro"),
                )
            )
            yield Label(t("tui.setup.provider"))
            yield Select(
                # Content, not markup: a missing extra's hint ("habakkuk[...]") is text.
                [(Content(choice.title), choice.name) for choice in CHOICES],
                prompt=t("tui.setup.choose_provider"),
                id="provider",
            )
            yield self.errors["provider"]
            yield Label(t("tui.setup.server_url"), id="base-url-label")
            yield Input(placeholder=t("tui.setup.server_url_hint"), id="base-url")
            yield self.errors["base-url"]
            yield Label(t("tui.setup.key"))
            yield Input(placeholder=t("tui.setup.secret_hint"), password=True, id="key")
            yield self.errors["key"]
            yield Label(t("tui.setup.model"))
            yield Input(placeholder=t("tui.setup.model_hint"), id="model")
            yield self.errors["model"]
            yield Label(t("tui.setup.workspace"))
            yield Input(placeholder=t("tui.setup.workspace_hint"), id="workspace")
            yield self.errors["workspace"]
            yield self.errors["config"]
            yield self._check
            with Horizontal():
                yield Button(t("tui.setup.save"), id="save", variant="primary")
                yield Button(t("tui.setup.demo"), id="demo")
                yield Button(t("tui.setup.channel"), id="channel")
        yield KeyFooter()

    def on_mount(self) -> None:
        for error in self.errors.values():
            error.display = False
        self._check.display = False
        self._show_base_url(False)
        self.query_one("#provider", Select).focus()

    def _show_base_url(self, shown: bool) -> None:
        self.query_one("#base-url-label").display = shown
        self.query_one("#base-url", Input).display = shown

    def on_select_changed(self, event: Select.Changed) -> None:
        choice = CHOICES_BY_NAME.get(str(event.value))
        self._show_base_url(bool(choice and choice.asks_base_url))
        self._error(
            "provider", f"{choice.label} {choice.missing}." if choice and choice.missing else ""
        )
        if choice is not None:
            hint = choice.default_model or "llama3.1"
            self.query_one("#model", Input).placeholder = f"e.g. {hint}"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        elif event.button.id == "demo":
            self.action_demo()
        elif event.button.id == "channel":
            self.action_channel()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.focus_next()

    def _error(self, field: str, message: str) -> None:
        widget = self.errors[field]
        widget.update(Content(message))
        widget.display = bool(message)

    def _status(self, message: str) -> None:
        self._check.update(Content(message))
        self._check.display = bool(message)

    def validate(self) -> Plan | None:
        """Check the form; show each problem under its field; the plan when all is well."""
        for field in self.errors:
            self._error(field, "")
        value = self.query_one("#provider", Select).value
        choice = CHOICES_BY_NAME.get(value) if isinstance(value, str) else None
        base_url = self.query_one("#base-url", Input).value.strip().rstrip("/")
        key = self.query_one("#key", Input).value.strip()
        model = self.query_one("#model", Input).value.strip()
        workspace = self.query_one("#workspace", Input).value.strip()
        ok = True
        if choice is None:
            self._error("provider", t("tui.setup.pick_provider"))
            return None
        if choice.missing:
            self._error("provider", f"{choice.label} {choice.missing}, or choose another.")
            ok = False
        if choice.asks_base_url and not base_url.startswith(("http://", "https://")):
            self._error("base-url", t("tui.setup.bad_url"))
            ok = False
        if not key and not choice.key_optional:
            needs = t("tui.setup.key_needed", provider=choice.label, variable=choice.key_env)
            self._error("key", needs)
            ok = False
        if key and (any(c.isspace() for c in key) or any(c in key for c in "\"'#")):
            self._error("key", t("tui.setup.key_chars"))
            ok = False
        if not model:
            example = choice.default_model or "llama3.1"
            self._error("model", t("tui.setup.name_model", example=example))
            ok = False
        elif any(c.isspace() for c in model) or '"' in model or model.startswith("/"):
            self._error("model", t("tui.setup.model_chars"))
            ok = False
        if workspace:
            path = Path(workspace).expanduser()
            if path.exists() and not path.is_dir():
                self._error("workspace", t("tui.setup.not_a_folder", path=path))
                ok = False
        if not ok:
            return None
        return Plan(choice, base_url if choice.asks_base_url else None, key, model, workspace)

    def action_save(self) -> None:
        """Check the key, then write the config (and the key) when the form is valid."""
        plan = self.validate()
        if plan is not None:
            self._save(plan)

    def action_channel(self) -> None:
        """The chat channel form over this one (habakkuk.screens.channel_setup); it joins
        the saved config, so on a first run it says to save a provider first."""
        from habakkuk.screens.channel_setup import ChannelSetupScreen

        self.app.push_screen(ChannelSetupScreen(self.home))

    def action_demo(self) -> None:
        """The offline demo with the mock provider: the commented starter config on a first
        run, else added to the existing config."""
        self._save(Plan(CHOICES_BY_NAME["demo"], None, "", "tour", ""))

    @work(exclusive=True, group="write")
    async def _save(self, plan: Plan) -> None:
        from habakkuk.engine.errors import ConfigError
        from habakkuk.services.setup import ProviderSetup, SetupAccess, check_key

        if not plan.choice.is_demo and plan != self.unchecked:
            self._status(t("tui.setup.checking"))
            result = await check_key(plan.choice, plan.key, plan.base_url)
            if not result.ok:
                self.unchecked = plan
                self._status("")
                self._error("key", t("tui.setup.check_failed", reason=result.reason))
                return
        self._status(t("tui.setup.saving"))
        setup: SetupAccess = ProviderSetup(self.home, out=lambda line: None)
        home = self.home
        workspace = str(
            Path(plan.workspace).expanduser().absolute()
            if plan.workspace
            else home.default_workspace(AGENT)
        )

        def write() -> None:
            from habakkuk.engine.starter import STARTER_CONFIG

            if plan.choice.is_demo and not home.config_path.exists():
                text = STARTER_CONFIG
            else:
                key_set = bool(plan.key)
                text = setup.build_config(
                    plan.choice, plan.base_url, key_set, plan.model, workspace
                )
            if plan.key and plan.choice.key_env:
                home.prepare()
                setup.write_env(plan.choice.key_env, plan.key)
            setup.write_config(text)

        try:
            await asyncio.to_thread(write)
        except ConfigError as exc:
            self._status("")
            self._error("config", str(exc))
            return
        except OSError as exc:
            self._status("")
            self._error("config", f"{home.root}: cannot write: {exc.strerror}")
            return
        self.dismiss(home.config_path)
