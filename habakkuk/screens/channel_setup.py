"""Add a chat channel: the platform, its steps, its answers, checked before they are saved.

`habakkuk setup channel`'s step as a form, over the same service
(habakkuk.services.channel_setup) and so over every platform the registry knows: the
platform's instructions (what to create on its side, which token goes where), one input
per field (secrets hidden), and Check and save, which asks the platform from a worker, on
a thread of its own (a linked device shows its pairing code here first), and writes only
when it answered: the secrets into HOME/.env (0600), `channels.<name>` into the config,
the rest of the file kept. After a failed check, pressing it again saves anyway; a name
already in the config is replaced only when pressed again too. Opened from the setup
screen and the palette's "Setup: chat channel".
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, Input, Label, Select, Static

from habakkuk.engine.i18n import t
from habakkuk.services.channel_setup import (
    ChannelPlan,
    ChannelSetup,
    ChannelSetupAccess,
    ChannelSetupError,
    check_in_thread,
    platform_setup,
    platforms,
    takes_base_url,
)
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.channels.platforms import PlatformSetup
    from habakkuk.engine.home import Home


class ChannelSetupScreen(Screen[str | None]):
    """The channel form; dismisses with the name of the last account it wrote (or None)."""

    DEFAULT_CSS = """
    ChannelSetupScreen VerticalScroll { padding: 0 2; }
    ChannelSetupScreen Label { margin-top: 1; text-style: bold; }
    ChannelSetupScreen #fields { height: auto; }
    ChannelSetupScreen .help { color: $text-muted; height: auto; }
    ChannelSetupScreen #instructions { margin-top: 1; height: auto; }
    ChannelSetupScreen #channel-error { color: $text-error; height: auto; }
    ChannelSetupScreen #result { height: auto; margin-top: 1; }
    ChannelSetupScreen #shown { height: auto; }
    ChannelSetupScreen Horizontal { height: auto; margin-top: 1; }
    ChannelSetupScreen Button { margin-right: 2; }
    """
    BINDINGS = [
        Binding("ctrl+s", "save", "Check and save", id="channel-setup.save"),
        Binding("escape", "close", "Close", id="channel-setup.close"),
    ]

    def __init__(self, home: Home) -> None:
        super().__init__(id="channel-setup")
        self.home = home
        self.service: ChannelSetupAccess = ChannelSetup(home)
        self.choices = platforms()
        self.setup: PlatformSetup | None = None
        # The plan whose check failed: saving it again saves anyway.
        self.unchecked: ChannelPlan | None = None
        # The name the person was told exists: saving it again replaces that account.
        self.replacing = ""
        self.written: str | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(
                Content.assemble(
                    (t("tui.channel.welcome"), "bold"),
                    t("tui.channel.intro"),
                )
            )
            yield Label(t("tui.channel.platform"))
            yield Select(
                [(Content(choice.label), choice.type) for choice in self.choices],
                prompt=t("tui.channel.choose_platform"),
                id="platform",
            )
            yield Static("", id="instructions", classes="help")
            yield Label(t("tui.channel.name"), id="name-label")
            yield Input(placeholder=t("tui.channel.name_hint"), id="name")
            yield Vertical(id="fields")
            yield Label(t("tui.channel.base_url"), id="base-url-label")
            yield Input(placeholder=t("tui.channel.base_url_hint"), id="base-url")
            yield Static("", id="channel-error")
            yield Static("", id="result")
            yield Static("", id="shown")
            with Horizontal():
                yield Button(t("tui.channel.save"), id="save", variant="primary")
                yield Button(t("tui.channel.close"), id="close")
        yield KeyFooter()

    def on_mount(self) -> None:
        for selector in ("#name-label", "#name", "#fields", "#base-url-label", "#base-url"):
            self.query_one(selector).display = False
        for selector in ("#channel-error", "#result", "#shown"):
            self.query_one(selector).display = False
        self.query_one("#platform", Select).focus()
        self._config_ready()

    @work(group="config")
    async def _config_ready(self) -> None:
        """Say at once when there is no config a channel can join (first run)."""
        try:
            await asyncio.to_thread(self.service.existing)
        except ChannelSetupError as exc:
            self._say("#channel-error", str(exc))
            self.query_one("#save", Button).disabled = True

    def _say(self, selector: str, message: str) -> None:
        widget = self.query_one(selector, Static)
        widget.update(Content(message))
        widget.display = bool(message)

    async def on_select_changed(self, event: Select.Changed) -> None:
        """The chosen platform's steps and fields (one input each, secrets hidden)."""
        self._say("#channel-error", "")
        self._say("#result", "")
        self._say("#shown", "")
        choice = next((c for c in self.choices if c.type == event.value), None)
        fields = self.query_one("#fields", Vertical)
        await fields.remove_children()
        self.setup = None
        if choice is None or choice.missing:
            if choice is not None:
                self._say("#channel-error", f"{choice.title} {choice.missing}.")
            return
        try:
            setup = platform_setup(choice.type)
        except ChannelSetupError as exc:
            self._say("#channel-error", str(exc))
            return
        self.setup = setup
        self.query_one("#instructions", Static).update(Content(setup.instructions))
        name = self.query_one("#name", Input)
        name.placeholder = t("tui.channel.name_hint_default", type=setup.type)
        for selector in ("#name-label", "#name", "#fields"):
            self.query_one(selector).display = True
        for item in setup.fields:
            await fields.mount(
                Label(item.prompt + (t("tui.channel.hidden") if item.secret else ""))
            )
            await fields.mount(
                Input(
                    value=item.default,
                    placeholder=t("tui.setup.secret_hint") if item.secret else "",
                    password=item.secret,
                    id=f"field-{item.key}",
                )
            )
            if item.help:
                await fields.mount(Static(Content(item.help), classes="help"))
        shown = takes_base_url(setup)
        self.query_one("#base-url-label").display = shown
        self.query_one("#base-url", Input).display = shown

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.focus_next()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        elif event.button.id == "close":
            self.action_close()

    def action_close(self) -> None:
        """Back to where the screen was opened, with the account written (if any)."""
        self.dismiss(self.written)

    def action_save(self) -> None:
        """Check the answers with the platform, then save them."""
        if self.query_one("#save", Button).disabled:
            return
        if self.setup is None:
            self._say("#channel-error", t("tui.channel.pick_platform"))
            return
        name = self.query_one("#name", Input).value.strip() or self.setup.type
        answers = {
            item.key: self.query_one(f"#field-{item.key}", Input).value
            for item in self.setup.fields
        }
        base_url = self.query_one("#base-url", Input).value if takes_base_url(self.setup) else ""
        plan = ChannelPlan(self.setup, name, answers, base_url, replace=name == self.replacing)
        self._save(plan)

    @work(exclusive=True, group="channel")
    async def _save(self, plan: ChannelPlan) -> None:
        from habakkuk.engine.errors import ConfigError

        self._say("#channel-error", "")
        self._say("#result", "")
        try:
            draft = await asyncio.to_thread(self.service.prepare, plan)
        except ChannelSetupError as exc:
            message = str(exc)
            if message.startswith(f"channels.{plan.name} exists"):
                self.replacing = plan.name
                message += t("tui.channel.replace")
            self._say("#channel-error", message)
            return
        title = plan.setup.title
        checked = ""
        if plan != self.unchecked:
            self._say("#result", t("tui.channel.checking", platform=title))

            # In a thread with a loop of its own: a platform's check that blocks stalls
            # that thread, not this screen; what it shows (a pairing code) comes back here.
            def show(text: str) -> None:
                self.app.call_from_thread(self._say, "#shown", text)

            result = await asyncio.to_thread(check_in_thread, draft, self.home, show)
            if not result.ok:
                self.unchecked = plan
                self._say("#result", "")
                self._say(
                    "#channel-error",
                    t("tui.channel.check_failed", reason=result.reason),
                )
                return
            checked = t("tui.channel.connected", who=result.who)
        self._say("#result", t("tui.setup.saving"))
        try:
            saved = await asyncio.to_thread(self.service.save, draft)
        except (ChannelSetupError, ConfigError) as exc:
            self._say("#result", "")
            self._say("#channel-error", str(exc))
            return
        except OSError as exc:
            self._say("#result", "")
            unwritable = t("tui.channel.cannot_write", path=self.home.root, reason=exc.strerror)
            self._say("#channel-error", unwritable)
            return
        self.written = plan.name
        self.unchecked = None
        self.replacing = ""
        stored = "".join(
            " " + t("tui.channel.stored", variable=variable, where=where)
            for variable, where in saved.stored.items()
        )
        notes = "".join(" " + t("tui.channel.note", note=note) for note in saved.notes)
        where = t("tui.channel.saved", name=plan.name, path=self.home.config_path)
        self._say("#result", f"{checked}{where}{stored}{notes} {t('tui.channel.restart')}")
        self.query_one("#close", Button).label = t("tui.channel.done")
