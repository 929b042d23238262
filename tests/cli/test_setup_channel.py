"""`habakkuk setup channel [TYPE]` and the channel offer after the provider step: answers
fed through input()/getpass, the check against the fake Telegram Bot API.

The command runs in a thread (it runs its own event loop, as on a terminal) while the
test's loop serves the fake."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest
import yaml

from habakkuk.channels.platforms import PLATFORM_MODULES
from habakkuk.cli import main
from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home, read_env_file
from habakkuk.services.channel_setup import platforms
from habakkuk.services.setup import CHOICES
from tests.channels.fake_telegram import BOT_TOKEN, FakeTelegram
from tests.cli.test_setup import Answers

OLD = "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"


@pytest.fixture
def configured(home: Home, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    home.config_path.write_text(OLD, encoding="utf-8")
    return home


async def setup_channel(tg: FakeTelegram, *words: str) -> int:
    return await asyncio.to_thread(main, ["setup", *words, "--base-url", tg.base_url])


async def test_a_telegram_bot_is_checked_and_saved(
    configured: Home,
    tg: FakeTelegram,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = Answers(monkeypatch, ["", "42"], [BOT_TOKEN])
    assert await setup_channel(tg, "channel", "telegram") == 0
    out = capsys.readouterr().out
    assert "@BotFather" in out  # the platform's instructions
    assert "connected as @habakkuk_bot" in out
    assert BOT_TOKEN not in out
    assert any("Bot token (input is hidden)" in prompt for prompt in answers.prompts)
    assert read_env_file(configured.env_path) == {"TELEGRAM_BOT_TOKEN": BOT_TOKEN}
    assert stat.S_IMODE(configured.env_path.stat().st_mode) == 0o600
    channel = load_config(configured).channels["telegram"]
    assert (channel.token_env, channel.allowed, channel.base_url) == (
        "TELEGRAM_BOT_TOKEN",
        ["42"],
        tg.base_url,
    )
    assert (configured.root / "config.yaml.bak").read_text(encoding="utf-8") == OLD


async def test_a_refused_token_can_be_entered_again(
    configured: Home,
    tg: FakeTelegram,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    Answers(monkeypatch, ["work", "42", "r", "42"], ["123:WRONG", BOT_TOKEN])
    assert await setup_channel(tg, "channel", "telegram") == 0
    out = capsys.readouterr().out
    assert "the check failed: Telegram refused the token: Unauthorized" in out
    assert [call.method for call in tg.calls] == ["getMe"]  # the refused call is not one
    assert read_env_file(configured.env_path) == {"TELEGRAM_BOT_TOKEN_WORK": BOT_TOKEN}
    assert load_config(configured).channels["work"].token_env == "TELEGRAM_BOT_TOKEN_WORK"


async def test_a_refused_token_can_be_saved_anyway(
    configured: Home, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    Answers(monkeypatch, ["", "", "s"], ["123:OFFLINE"])
    assert await setup_channel(tg, "channel", "telegram") == 0
    assert read_env_file(configured.env_path) == {"TELEGRAM_BOT_TOKEN": "123:OFFLINE"}
    assert load_config(configured).channels["telegram"].allowed == []


async def test_skipping_after_a_refusal_writes_nothing(
    configured: Home,
    tg: FakeTelegram,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    Answers(monkeypatch, ["", "42", "k"], ["123:WRONG"])
    assert await setup_channel(tg, "channel", "telegram") == 1
    assert "skipped: no Telegram channel written" in capsys.readouterr().out
    assert configured.config_path.read_text(encoding="utf-8") == OLD
    assert not configured.env_path.exists()


async def test_an_existing_name_is_replaced_only_when_asked(
    configured: Home, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured.config_path.write_text(
        OLD + "channels:\n  telegram: {type: telegram, token_env: OLD_TOKEN, agent: main}\n",
        encoding="utf-8",
    )
    # "telegram" exists: no, another name; then that name is taken too: yes, replace.
    answers = Answers(monkeypatch, ["", "n", "telegram", "y", "42"], [BOT_TOKEN])
    assert await setup_channel(tg, "channel", "telegram") == 0
    assert sum("replace it?" in prompt for prompt in answers.prompts) == 2
    channel = load_config(configured).channels["telegram"]
    assert (channel.token_env, channel.agent) == ("TELEGRAM_BOT_TOKEN", "main")


async def test_the_whole_setup_offers_a_channel_after_the_provider(
    home: Home,
    tg: FakeTelegram,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    demo = str(len(CHOICES))
    number = str([choice.type for choice in platforms()].index("telegram") + 1)
    workspace = str(tmp_path / "ws")
    # demo provider, model, workspace; a channel: yes, telegram, name, allow_from; then
    # input ends at "Add another chat channel?", which is a no.
    answers = Answers(monkeypatch, [demo, "", workspace, "y", number, "", "42"], [BOT_TOKEN])
    assert await setup_channel(tg) == 0
    assert any("Add another chat channel?" in prompt for prompt in answers.prompts)
    out = capsys.readouterr().out
    assert "connected as @habakkuk_bot" in out
    assert "channel telegram" in out and "TELEGRAM_BOT_TOKEN set" in out  # the doctor's
    config = load_config(home)
    assert config.agent(None).name == "habakkuk"
    assert config.channels["telegram"].token_env == "TELEGRAM_BOT_TOKEN"
    assert yaml.safe_load(home.config_path.read_text(encoding="utf-8"))["default_agent"]


def test_no_to_the_channel_offer_leaves_the_provider_setup(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Answers(monkeypatch, [str(len(CHOICES)), "", str(tmp_path / "ws"), ""], [])
    assert main(["setup"]) == 0
    assert load_config(home).channels == {}
    assert not home.env_path.exists()


@pytest.mark.parametrize("kind", sorted(PLATFORM_MODULES))
def test_each_platform_shows_its_steps_and_input_ending_writes_nothing(
    configured: Home,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from habakkuk.services.channel_setup import platform_setup

    Answers(monkeypatch, [], [])  # stdin at its end, as with `< /dev/null`
    assert main(["setup", "channel", kind]) == 1
    captured = capsys.readouterr()
    assert platform_setup(kind).instructions.splitlines()[0] in captured.out
    assert captured.err == "habakkuk: setup channel: stopped (input ended); nothing was written\n"
    assert configured.config_path.read_text(encoding="utf-8") == OLD


def test_a_missing_config_or_an_unknown_platform_is_one_line(
    home: Home, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = Answers(monkeypatch, ["", "42"], ["123:X"])
    assert main(["setup", "channel", "telegram"]) == 1
    err = capsys.readouterr().err
    assert "no config yet; run `habakkuk setup` first" in err and err.count("\n") == 1
    assert answers.prompts == []  # said before any question
    home.config_path.write_text(OLD, encoding="utf-8")
    assert main(["setup", "channel", "pigeon"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("habakkuk: setup channel: no chat platform is called 'pigeon'")
    assert err.count("\n") == 1
