"""The whole `habakkuk setup` over an existing config with its optional Telegram step:
the bot token checked with getMe against the fake Telegram Bot API, the user's id as
allow_from, the person's own config kept as config.yaml.bak through both writes, and
`habakkuk doctor`'s checks printed at the end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home, read_env_file
from habakkuk.services.channel_setup import platforms
from habakkuk.services.setup import CHOICES
from tests.channels.fake_telegram import BOT_TOKEN, FakeTelegram
from tests.cli.test_setup import Answers

MINE = "# my own config\nproviders:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"


async def test_setup_with_telegram_keeps_the_persons_config_and_ends_with_doctor(
    home: Home,
    tg: FakeTelegram,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    home.config_path.write_text(MINE, encoding="utf-8")
    demo = str(len(CHOICES))
    telegram = str([choice.type for choice in platforms()].index("telegram") + 1)
    # demo provider, its model, the workspace; a channel: yes, Telegram, its name, the
    # person's numeric id; the token is the hidden answer; then no other channel.
    Answers(
        monkeypatch,
        [demo, "", str(tmp_path / "ws"), "y", telegram, "", "123456789", "n"],
        [BOT_TOKEN],
    )
    code = await asyncio.to_thread(main, ["setup", "--base-url", tg.base_url])
    assert code == 0
    out = capsys.readouterr().out
    assert "connected as @habakkuk_bot" in out  # getMe answered for this token
    assert [call.method for call in tg.calls if call.method == "getMe"]
    assert home.config_path.with_name("config.yaml.bak").read_text(encoding="utf-8") == MINE
    channel = load_config(home).channels["telegram"]
    assert channel.allowed == ["123456789"] and channel.token_env == "TELEGRAM_BOT_TOKEN"
    assert read_env_file(home.env_path)["TELEGRAM_BOT_TOKEN"] == BOT_TOKEN
    # the doctor's checks close the run, one verdict line each
    doctor = out[out.index("\n", out.rindex("wrote channels.telegram")) :]
    assert "channel telegram" in doctor and "config" in doctor
    assert any(line.startswith("ok ") for line in doctor.splitlines())


async def test_a_refused_bot_token_is_said_and_can_be_skipped(
    home: Home,
    tg: FakeTelegram,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    demo = str(len(CHOICES))
    telegram = str([choice.type for choice in platforms()].index("telegram") + 1)
    Answers(
        monkeypatch,
        [demo, "", str(tmp_path / "ws"), "y", telegram, "", "42", "k", "n"],
        ["999:not-the-token"],
    )
    assert await asyncio.to_thread(main, ["setup", "--base-url", tg.base_url]) == 0
    out = capsys.readouterr().out
    assert "the check failed: Telegram refused the token" in out
    assert "skipped: no Telegram channel written" in out
    assert load_config(home).channels == {}
    assert not home.config_path.with_name("config.yaml.bak").exists()  # nothing replaced
