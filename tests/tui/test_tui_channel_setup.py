"""The chat channel form: a platform's steps and fields, the answers checked with the
platform (the fake Telegram Bot API) in a worker, the account written only then."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Input, Select, Static

from habakkuk.channels.platforms import PLATFORM_MODULES
from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home, read_env_file
from habakkuk.screens.channel_setup import ChannelSetupScreen
from habakkuk.services.channel_setup import platform_setup, required
from tests.channels.fake_telegram import BOT_TOKEN, FakeTelegram
from tests.helpers import eventually
from tests.tui.conftest import make_app, ready

OLD = "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"


@pytest.fixture
def configured(home: Home, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    home.config_path.write_text(OLD, encoding="utf-8")
    return home


async def open_form(pilot: Pilot[Any]) -> ChannelSetupScreen:
    """The palette's "Setup: chat channel", on the running app."""
    app = await ready(pilot)
    [entry] = [c for c in app.get_system_commands(app.screen) if c.title == "Setup: chat channel"]
    entry.callback()
    await eventually(lambda: isinstance(app.screen, ChannelSetupScreen), what="the form")
    screen = app.screen
    assert isinstance(screen, ChannelSetupScreen)
    return screen


async def choose(pilot: Pilot[Any], kind: str) -> None:
    await pilot.pause()  # the form mounted
    pilot.app.screen.query_one("#platform", Select).value = kind
    fields = platform_setup(kind).fields
    await eventually(
        lambda: all(pilot.app.screen.query(f"#field-{item.key}") for item in fields),
        what=f"the fields of {kind}",
    )


async def fill(pilot: Pilot[Any], **fields: str) -> None:
    """Type into the form's inputs: name=..., base_url=..., or a field's key."""
    screen = pilot.app.screen
    for key, value in fields.items():
        selector = f"#{key.replace('_', '-')}" if key in ("name", "base_url") else f"#field-{key}"
        widget = screen.query_one(selector, Input)
        widget.value = ""
        widget.focus()
        await pilot.press(*value)


def said(pilot: Pilot[Any], selector: str) -> str:
    widget = pilot.app.screen.query_one(selector, Static)
    return str(widget.content) if widget.display else ""


async def test_a_checked_telegram_bot_is_saved(configured: Home, tg: FakeTelegram) -> None:
    app = make_app(configured)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_form(pilot)
        await choose(pilot, "telegram")
        assert "@BotFather" in said(pilot, "#instructions")
        token = screen.query_one("#field-token_env", Input)
        assert token.password and not screen.query_one("#field-allow_from", Input).password
        await fill(pilot, token_env=BOT_TOKEN, allow_from="42", base_url=tg.base_url)
        await pilot.press("ctrl+s")
        await eventually(lambda: "Connected as @habakkuk_bot" in said(pilot, "#result"), what="ok")
        assert "Saved channels.telegram" in said(pilot, "#result")
        channel = load_config(configured).channels["telegram"]
        assert (channel.token_env, channel.allowed, channel.base_url) == (
            "TELEGRAM_BOT_TOKEN",
            ["42"],
            tg.base_url,
        )
        assert read_env_file(configured.env_path) == {"TELEGRAM_BOT_TOKEN": BOT_TOKEN}
        assert (configured.root / "config.yaml.bak").read_text(encoding="utf-8") == OLD
        assert str(screen.query_one("#close", Button).label) == "Done"
        await pilot.press("escape")
        await eventually(lambda: not isinstance(app.screen, ChannelSetupScreen), what="closed")


async def test_a_refused_token_says_why_and_saving_again_saves_anyway(
    configured: Home, tg: FakeTelegram
) -> None:
    app = make_app(configured)
    async with app.run_test(size=(100, 40)) as pilot:
        await open_form(pilot)
        await choose(pilot, "telegram")
        await fill(pilot, name="work", token_env="123:WRONG", base_url=tg.base_url)
        await pilot.press("ctrl+s")
        await eventually(lambda: "refused" in said(pilot, "#channel-error"), what="the refusal")
        assert "Telegram refused the token: Unauthorized" in said(pilot, "#channel-error")
        assert configured.config_path.read_text(encoding="utf-8") == OLD
        assert not configured.env_path.exists()
        await pilot.press("ctrl+s")
        await eventually(lambda: "Saved channels.work" in said(pilot, "#result"), what="saved")
        assert "Connected" not in said(pilot, "#result")
        assert read_env_file(configured.env_path) == {"TELEGRAM_BOT_TOKEN_WORK": "123:WRONG"}


async def test_an_existing_name_is_replaced_when_saved_again(
    configured: Home, tg: FakeTelegram
) -> None:
    configured.config_path.write_text(
        OLD + "channels:\n  telegram: {type: telegram, token_env: OLD_TOKEN}\n", encoding="utf-8"
    )
    app = make_app(configured)
    async with app.run_test(size=(100, 40)) as pilot:
        await open_form(pilot)
        await choose(pilot, "telegram")
        await fill(pilot, token_env=BOT_TOKEN, base_url=tg.base_url)
        await pilot.press("ctrl+s")
        await eventually(lambda: "again to replace" in said(pilot, "#channel-error"), what="asked")
        assert tg.calls == []  # nothing checked yet
        await pilot.press("ctrl+s")
        await eventually(lambda: "Saved" in said(pilot, "#result"), what="replaced")
        assert load_config(configured).channels["telegram"].token_env == "TELEGRAM_BOT_TOKEN"


async def test_on_a_first_run_the_form_says_to_save_a_provider_first(home: Home) -> None:
    app = make_app(home)
    async with app.run_test(size=(100, 40)) as pilot:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await pilot.pause()
        await pilot.click("#channel")
        await eventually(lambda: isinstance(app.screen, ChannelSetupScreen), what="the form")
        await eventually(lambda: "no config yet" in said(pilot, "#channel-error"), what="why")
        assert app.screen.query_one("#save", Button).disabled
        await pilot.press("escape")
        await eventually(lambda: app.screen.id == "setup", what="back to the setup screen")
        assert not home.config_path.exists()


@pytest.mark.parametrize("kind", sorted(PLATFORM_MODULES))
async def test_each_platform_shows_its_steps_and_one_input_per_field(
    configured: Home, kind: str
) -> None:
    setup = platform_setup(kind)
    app = make_app(configured)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_form(pilot)
        await choose(pilot, kind)
        assert setup.instructions.splitlines()[0] in said(pilot, "#instructions")
        for item in setup.fields:
            assert screen.query_one(f"#field-{item.key}", Input).password == item.secret
        await pilot.press("ctrl+s")  # nothing typed: a needed answer is asked for
        if any(required(setup, item) and not item.default for item in setup.fields):
            await eventually(lambda: "needed" in said(pilot, "#channel-error"), what="refusal")
            assert configured.config_path.read_text(encoding="utf-8") == OLD
