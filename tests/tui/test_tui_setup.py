"""The setup screen shares `habakkuk setup`'s choices and key check, keeps the demo
provider, and opens again from the palette."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Select, Static

from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home, read_env_file
from habakkuk.engine.starter import STARTER_CONFIG
from habakkuk.screens.setup import SetupScreen
from habakkuk.services.setup import CHOICES, CHOICES_BY_NAME
from tests.fakes.model_server import FakeModelServer
from tests.helpers import eventually
from tests.tui.conftest import make_app, ready


async def fill(pilot: Pilot[Any], **fields: str) -> None:
    """Type into the setup form's inputs by id (base_url -> #base-url)."""
    screen = pilot.app.screen
    for name, value in fields.items():
        widget = screen.query_one(f"#{name.replace('_', '-')}", Input)
        widget.value = ""
        widget.focus()
        await pilot.press(*value)


async def choose(pilot: Pilot[Any], provider: str) -> None:
    await pilot.pause()  # the form mounted
    pilot.app.screen.query_one("#provider", Select).value = provider
    await pilot.pause()


def error(pilot: Pilot[Any], field: str) -> str:
    widget = pilot.app.screen.query_one(f"#{field}-error", Static)
    return str(widget.content) if widget.display else ""


async def test_the_screen_offers_the_wizards_choices(home: Home) -> None:
    app = make_app(home)
    async with app.run_test(size=(80, 24)):
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        select = app.screen.query_one("#provider", Select)
        offered = [value for _, value in select._options if isinstance(value, str)]
        assert offered == [choice.name for choice in CHOICES]
        assert {"anthropic", "openai", "openrouter", "custom", "gemini", "demo"} <= set(offered)


async def test_gemini_needs_no_extra(home: Home) -> None:
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await choose(pilot, "gemini")
        assert error(pilot, "provider") == ""


async def test_a_choice_shows_its_bracketed_extra_as_written(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`habakkuk[litellm]` is text, not markup: the option list and the chosen value show
    it whole (it read "pip install 'habakkuk'" with the brackets eaten). No choice needs an
    extra today: the gemini one is made to need a module that is not installed."""
    from textual.widgets import OptionList

    index = [choice.name for choice in CHOICES].index("gemini")
    needy = dataclasses.replace(CHOICES[index], needs_module="habakkuk_not_installed_module")
    choices = [needy if choice.name == "gemini" else choice for choice in CHOICES]
    monkeypatch.setattr("habakkuk.screens.setup.CHOICES", choices)
    monkeypatch.setitem(CHOICES_BY_NAME, "gemini", needy)
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await pilot.pause()  # the form mounted
        select = app.screen.query_one("#provider", Select)
        select.focus()
        await pilot.press("enter")  # the list of choices
        options = select.query_one(OptionList)
        await eventually(lambda: options.display, what="the choices")
        await pilot.press(*["down"] * (index + 1))  # the list opens on its prompt
        await pilot.pause()
        drawn = "\n".join(options.render_line(y).text for y in range(options.size.height))
        assert "pip install 'habakkuk[litellm]'" in drawn, drawn
        await pilot.press("enter")
        await eventually(lambda: select.value == "gemini", what="gemini chosen")
        shown = select.query_one("#label").render_line(0).text
        assert "habakkuk[lite" in shown, shown  # as much as fits of it, brackets and all


async def test_a_refused_key_says_why_and_save_again_saves_anyway(
    home: Home, models: FakeModelServer
) -> None:
    models.valid_keys = {"sk-ant-good"}
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await choose(pilot, "anthropic")
        await fill(pilot, key="sk-ant-bad", model="claude-sonnet-4-6")
        await pilot.press("ctrl+s")
        await eventually(lambda: "refused" in error(pilot, "key"), what="the failed check")
        assert "Save again to save anyway" in error(pilot, "key")
        assert not home.config_path.exists()
        # Retry with another key: checked again, and saved.
        await fill(pilot, key="sk-ant-good")
        await pilot.press("ctrl+s")
        await eventually(home.config_path.exists, what="the config")
        assert [r.api_key for r in models.requests] == ["sk-ant-bad", "sk-ant-good"]
        assert read_env_file(home.env_path) == {"ANTHROPIC_API_KEY": "sk-ant-good"}
        await ready(pilot)


async def test_a_failed_check_can_be_saved_anyway(home: Home, models: FakeModelServer) -> None:
    models.valid_keys = set()
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await choose(pilot, "openai")
        await fill(pilot, key="sk-offline", model="gpt-5-mini")
        await pilot.press("ctrl+s")
        await eventually(lambda: "refused" in error(pilot, "key"), what="the failed check")
        await pilot.press("ctrl+s")
        await eventually(home.config_path.exists, what="the config saved anyway")
        assert len(models.requests) == 1  # not checked twice
        assert read_env_file(home.env_path) == {"OPENAI_API_KEY": "sk-offline"}
        await ready(pilot)


async def test_palette_reopens_setup_and_a_compatible_url_keeps_the_demo(
    home: Home, models: FakeModelServer
) -> None:
    home.config_path.write_text(STARTER_CONFIG, encoding="utf-8")
    app = make_app(home)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        [entry] = [c for c in app.get_system_commands(app.screen) if c.title.endswith("providers")]
        assert entry.title == "Setup: providers"
        entry.callback()
        await eventually(lambda: isinstance(app.screen, SetupScreen), what="setup again")
        await choose(pilot, "custom")
        assert app.screen.query_one("#base-url", Input).display
        await fill(pilot, model="llama3.1")
        await pilot.press("ctrl+s")
        await eventually(lambda: "http://" in error(pilot, "base-url"), what="the URL asked")
        await fill(pilot, base_url=f"{models.base_url}/v1")
        await pilot.press("ctrl+s")
        await eventually(lambda: not isinstance(app.screen, SetupScreen), what="saved")
        assert [r.path for r in models.requests] == ["/v1/models"]
        config = load_config(home)
        assert set(config.providers) == {"demo", "custom"}
        assert config.providers["custom"].base_url == f"{models.base_url}/v1"
        assert [str(r) for r in config.agent(None).chain] == ["custom/llama3.1"]
        assert (home.root / "config.yaml.bak").read_text(encoding="utf-8") == STARTER_CONFIG
