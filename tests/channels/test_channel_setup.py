"""Adding a chat channel (habakkuk.services.channel_setup): the answers checked with the
platform (the fake Telegram Bot API), the secret in HOME/.env, `channels.<name>` in the
config with everything else kept; a refusal writes nothing."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import yaml

from habakkuk.channels.platforms import (
    PlatformSetup,
    SetupCheck,
    SetupCheckFailed,
    SetupField,
    SetupLink,
)
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home, read_env_file
from habakkuk.services.channel_setup import (
    ChannelPlan,
    ChannelSetup,
    ChannelSetupError,
    check,
    platform_setup,
    platforms,
)
from tests.channels.fake_telegram import BOT_TOKEN, FakeTelegram

OLD = """\
# my own config
providers:
  demo: {type: mock}
agents:
  main: {model: demo/echo}
timezone: Europe/Paris
"""


@pytest.fixture
def configured(home: Home, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    home.config_path.write_text(OLD, encoding="utf-8")
    return home


def telegram_plan(tg: FakeTelegram, token: str) -> ChannelPlan:
    answers = {"token_env": token, "allow_from": "42, @alice"}
    return ChannelPlan(platform_setup("telegram"), "telegram", answers, tg.base_url)


def test_the_registered_platforms_are_offered_with_their_titles() -> None:
    offered = {choice.type: choice for choice in platforms()}
    assert offered["telegram"].title == "Telegram"
    assert offered["telegram"].missing == ""


async def test_a_good_token_is_checked_then_stored_and_the_entry_written(
    configured: Home, tg: FakeTelegram
) -> None:
    service = ChannelSetup(configured)
    draft = await asyncio.to_thread(service.prepare, telegram_plan(tg, BOT_TOKEN))
    result = await check(draft, configured)
    assert (result.ok, result.who) == (True, "@habakkuk_bot")
    assert [call.method for call in tg.calls] == ["getMe"]
    saved = service.save(draft)
    assert saved.stored == {"TELEGRAM_BOT_TOKEN": str(configured.env_path)}

    env = configured.env_path
    assert read_env_file(env) == {"TELEGRAM_BOT_TOKEN": BOT_TOKEN}
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    text = configured.config_path.read_text(encoding="utf-8")
    assert BOT_TOKEN not in text  # the config names the variable, never the value
    assert stat.S_IMODE(configured.config_path.stat().st_mode) == 0o600
    assert (configured.root / "config.yaml.bak").read_text(encoding="utf-8") == OLD
    data = yaml.safe_load(text)
    assert data["channels"] == {
        "telegram": {
            "type": "telegram",
            "token_env": "TELEGRAM_BOT_TOKEN",
            "allow_from": ["42", "@alice"],
            "base_url": tg.base_url,
        }
    }
    del data["channels"]
    assert data == yaml.safe_load(OLD)  # every other part kept
    config = load_config(configured)
    assert config.channels["telegram"].allowed == ["42", "@alice"]
    assert config.timezone == "Europe/Paris"


async def test_a_refused_token_says_why_and_nothing_is_written(
    configured: Home, tg: FakeTelegram
) -> None:
    draft = ChannelSetup(configured).prepare(telegram_plan(tg, "123:WRONG"))
    result = await check(draft, configured)
    assert not result.ok
    assert result.reason == "Telegram refused the token: Unauthorized"
    assert configured.config_path.read_text(encoding="utf-8") == OLD
    assert not configured.env_path.exists()
    assert not (configured.root / "config.yaml.bak").exists()


async def test_an_unreachable_server_is_one_line(configured: Home, tg: FakeTelegram) -> None:
    await tg.stop()
    draft = ChannelSetup(configured).prepare(telegram_plan(tg, BOT_TOKEN))
    result = await check(draft, configured)
    assert not result.ok
    assert result.reason.startswith(f"cannot reach {tg.base_url}: ")
    assert "\n" not in result.reason and BOT_TOKEN not in result.reason


def made_up(
    kind: str = "telegram",
    check: SetupCheck | None = None,
    link: SetupLink | None = None,
    fields: tuple[SetupField, ...] = (),
) -> PlatformSetup:
    """A platform's setup step written here: what a failing or linking platform does."""

    async def ok(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
        return "@made_up"

    return PlatformSetup(kind, "Made-up", "create a bot", fields, check or ok, link)


TOKEN_FIELD = (SetupField("token_env", "Bot token", secret=True, variable="MADE_UP_TOKEN"),)


async def test_any_failure_of_a_check_is_one_line_without_the_secret(configured: Home) -> None:
    async def crashes(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
        raise RuntimeError(f"bad URL\nhttp://x/bot{secrets['MADE_UP_TOKEN']}/getMe")

    setup = made_up(check=crashes, fields=TOKEN_FIELD)
    draft = ChannelSetup(configured).prepare(
        ChannelPlan(setup, "telegram", {"token_env": "s3cr3t"})
    )
    result = await check(draft, configured)
    assert result == type(result)(False, reason="RuntimeError: bad URL http://x/bot***/getMe")


async def test_a_check_that_never_answers_is_cut_off(configured: Home) -> None:
    async def hangs(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
        await asyncio.Event().wait()
        return ""

    setup = made_up(check=hangs, fields=TOKEN_FIELD)
    draft = ChannelSetup(configured).prepare(
        ChannelPlan(setup, "telegram", {"token_env": "tok-123"})
    )
    result = await check(draft, configured, timeout=0.05)
    assert result.reason == "no answer from Made-up in time"


async def test_a_refusal_raised_by_the_platform_is_its_reason(configured: Home) -> None:
    async def refuses(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
        raise SetupCheckFailed("the workspace refused the app token")

    setup = made_up(check=refuses, fields=TOKEN_FIELD)
    draft = ChannelSetup(configured).prepare(
        ChannelPlan(setup, "telegram", {"token_env": "tok-123"})
    )
    assert (await check(draft, configured)).reason == "the workspace refused the app token"


async def test_a_linked_device_shows_its_code_then_is_checked(configured: Home) -> None:
    shown: list[str] = []
    linked: list[Path] = []

    async def link(config: ChannelConfig, state_dir: Path, show: Callable[[str], None]) -> str:
        show("█▀▀ QR ▀▀█")
        linked.append(state_dir)
        return "+4915100000"

    service = ChannelSetup(configured)
    draft = service.prepare(ChannelPlan(made_up("whatsapp", link=link), "whatsapp", {}))
    result = await check(draft, configured, shown.append)
    assert result.ok and result.who == "@made_up"
    assert shown == ["█▀▀ QR ▀▀█"] and linked == [configured.channels_dir]
    assert stat.S_IMODE(configured.channels_dir.stat().st_mode) == 0o700
    service.save(draft)
    assert load_config(configured).channels["whatsapp"].type == "whatsapp"
    assert not configured.env_path.exists()  # no secret to store


def test_a_name_must_be_plain_and_free_unless_replaced(configured: Home) -> None:
    service = ChannelSetup(configured)
    setup = platform_setup("telegram")
    with pytest.raises(ChannelSetupError, match="use letters, digits, - and _ only"):
        service.prepare(ChannelPlan(setup, "my bot", {"token_env": "t"}))
    configured.config_path.write_text(
        OLD + "channels:\n  telegram: {type: telegram, token_env: TG, agent: main}\n",
        encoding="utf-8",
    )
    plan = ChannelPlan(setup, "telegram", {"token_env": "t", "allow_from": "7"})
    with pytest.raises(ChannelSetupError, match=r"channels\.telegram exists \(a telegram"):
        service.prepare(plan)
    assert service.existing() == {"telegram": "telegram"}
    draft = service.prepare(ChannelPlan(setup, "telegram", plan.answers, replace=True))
    assert draft.replaces == "telegram"
    assert (draft.config.agent, draft.config.allowed) == ("main", ["7"])  # its agent kept
    assert draft.config.token_env == "TELEGRAM_BOT_TOKEN"


def test_a_second_account_gets_a_variable_of_its_own(configured: Home) -> None:
    configured.config_path.write_text(
        OLD + "channels:\n  tg: {type: telegram, token_env: TELEGRAM_BOT_TOKEN}\n",
        encoding="utf-8",
    )
    service = ChannelSetup(configured)
    setup = platform_setup("telegram")
    work = service.prepare(ChannelPlan(setup, "work", {"token_env": "t"}))
    assert work.secrets == {"TELEGRAM_BOT_TOKEN_WORK": "t"}
    named = service.prepare(ChannelPlan(setup, "telegram", {"token_env": "t"}))
    assert named.secrets == {"TELEGRAM_BOT_TOKEN_TELEGRAM": "t"}  # not the tg bot's


def test_bad_answers_are_one_line_naming_the_setting(configured: Home) -> None:
    service = ChannelSetup(configured)
    setup = platform_setup("telegram")
    with pytest.raises(ChannelSetupError, match=r"^Bot token: needed$"):
        service.prepare(ChannelPlan(setup, "telegram", {"token_env": " "}))
    with pytest.raises(
        ChannelSetupError, match=r"^channels\.telegram\.base_url: 'ftp://x' is not an http"
    ):
        service.prepare(ChannelPlan(setup, "telegram", {"token_env": "t"}, "ftp://x"))
    assert configured.config_path.read_text(encoding="utf-8") == OLD


def test_a_channel_needs_a_config_to_join(home: Home) -> None:
    with pytest.raises(ChannelSetupError, match="no config yet; run `habakkuk setup` first"):
        ChannelSetup(home).prepare(ChannelPlan(platform_setup("telegram"), "t", {}))


def test_an_unknown_platform_names_the_known_ones() -> None:
    with pytest.raises(
        ChannelSetupError, match=r"no chat platform is called 'pigeon' \(.*telegram"
    ):
        platform_setup("pigeon")


def test_an_edit_made_while_the_platform_was_asked_is_kept(configured: Home) -> None:
    service = ChannelSetup(configured)
    draft = service.prepare(ChannelPlan(platform_setup("telegram"), "telegram", {"token_env": "t"}))
    configured.config_path.write_text(OLD + "default_agent: main\n", encoding="utf-8")
    service.save(draft)
    config = load_config(configured)
    assert config.default_agent == "main"
    assert config.channels["telegram"].token_env == "TELEGRAM_BOT_TOKEN"
