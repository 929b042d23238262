"""`habakkuk setup` for IRC and Twitch: the answers registered on the server before anything is
saved (a real ngircd), a refused SASL login said in one line (the fake IRCv3 server), and
the config checks of an IRC entry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.channels.twitch_setup import check_setup as check_twitch
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home, read_env_file
from habakkuk.services.channel_setup import ChannelPlan, ChannelSetup, check, platform_setup
from tests.channels.fake_irc import FakeIrc
from tests.channels.ngircd_server import Ngircd
from tests.channels.twitch_driver import TWITCH_TOKEN

OLD = """\
providers:
  demo: {type: mock}
agents:
  main: {model: demo/echo}
"""


@pytest.fixture
def configured(home: Home, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.delenv("IRC_PASSWORD", raising=False)
    home.config_path.write_text(OLD, encoding="utf-8")
    return home


async def test_a_private_server_is_checked_by_registering_then_written(
    configured: Home, ngircd: Ngircd
) -> None:
    answers = {
        "server": f"127.0.0.1:{ngircd.port}",
        "tls": "no",
        "nick": "habakkuk",
        "sasl": "no",
        "join": "#room #ops",
        "allow_from": "alice",
    }
    service = ChannelSetup(configured)
    draft = await asyncio.to_thread(
        service.prepare, ChannelPlan(platform_setup("irc"), "irc", answers)
    )
    result = await check(draft, configured)
    assert (result.ok, result.who) == (True, f"habakkuk on 127.0.0.1:{ngircd.port} (no TLS)")
    service.save(draft)
    entry = yaml.safe_load(configured.config_path.read_text(encoding="utf-8"))["channels"]["irc"]
    assert entry == {
        "type": "irc",
        "server": f"127.0.0.1:{ngircd.port}",
        "tls": False,
        "nick": "habakkuk",
        "sasl": False,
        "join": ["#room", "#ops"],
        "allow_from": ["alice"],
    }


async def test_a_refused_sasl_login_is_one_line_and_nothing_is_written(configured: Home) -> None:
    async with FakeIrc(accounts={"habakkuk": "right"}) as fake:
        answers = {
            "server": f"127.0.0.1:{fake.port}",
            "tls": "no",
            "nick": "habakkuk",
            "password_env": "wrong",
            "allow_from": "alice",
        }
        service = ChannelSetup(configured)
        draft = service.prepare(ChannelPlan(platform_setup("irc"), "irc", answers))
        result = await check(draft, configured)
    assert not result.ok
    assert result.reason.startswith(f"IRC at 127.0.0.1:{fake.port}: SASL login as habakkuk")
    assert "\n" not in result.reason and "wrong" not in result.reason
    assert configured.config_path.read_text(encoding="utf-8") == OLD
    assert "IRC_PASSWORD" not in read_env_file(configured.env_path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("server: irc.example.org\nnick: bot", r"password_env: SASL \(the default\) needs"),
        ("server: 'irc example'\nnick: bot\nsasl: false", "server: 'irc example' is not host"),
        ("server: irc.example.org\nnick: 9bot\nsasl: false", "nick: '9bot' is not an IRC nick"),
        (
            "server: irc.example.org\nnick: bot\nsasl: false\njoin: [room]",
            "join: 'room' is not an IRC channel",
        ),
        (
            "server: irc.example.org\nnick: bot\nsasl: false\ntls: starttls",
            "tls: IRC has no STARTTLS",
        ),
        ("nick: bot\nsasl: false", "server: an irc channel needs this"),
    ],
)
def test_an_irc_entry_is_checked_line_by_line(
    entry: str, message: str, home: Home, tmp_path: Path
) -> None:
    text = (
        OLD
        + "channels:\n  irc:\n    type: irc\n"
        + "".join(f"    {line}\n" for line in entry.splitlines())
    )
    with pytest.raises(ConfigError, match=rf"config.yaml:\d+: channels\.irc\.{message}"):
        parse_config(text, home.config_path, home)


async def test_twitch_setup_logs_in_with_the_token_before_saving() -> None:
    async with FakeIrc(twitch_token=TWITCH_TOKEN) as fake:
        config = ChannelConfig(
            type="twitch",
            server=f"127.0.0.1:{fake.port}",
            tls=False,
            nick="HabakkukBot",
            token_env="TWITCH_TOKEN",
            join=["#alice"],
        )
        assert await check_twitch(config, {"TWITCH_TOKEN": TWITCH_TOKEN}) == (
            "habakkukbot on Twitch chat"
        )
        with pytest.raises(SetupCheckFailed, match="Login authentication failed"):
            await check_twitch(config, {"TWITCH_TOKEN": "wrong"})
