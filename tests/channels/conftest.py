"""The platform drivers of the one-table test (tests/channels/test_every_platform.py): one
fixture per platform, named `<kind>_driver`, giving a PlatformDriver on its fake."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_irc import FakeIrc
from tests.channels.fake_ntfy import FakeNtfy
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.fake_twilio import FakeTwilio, SmsDriver
from tests.channels.irc_driver import IrcDriver
from tests.channels.ngircd_server import IrcPerson, Ngircd, running_ngircd
from tests.channels.ntfy_driver import NtfyDriver
from tests.channels.platform_driver import PlatformDriver
from tests.channels.telegram_driver import TelegramDriver
from tests.channels.twitch_driver import TWITCH_TOKEN, TwitchDriver
from tests.channels.web_driver import WebDriver

# Each fixture is typed PlatformDriver, so mypy checks its driver against the Protocol.


@pytest.fixture
def telegram_driver(tg: FakeTelegram) -> PlatformDriver:
    """The person on the fake Telegram Bot API (the shared `tg` fixture)."""
    return TelegramDriver(tg)


@pytest.fixture
async def ngircd() -> AsyncIterator[Ngircd]:
    """A real ngircd of this test's own on loopback ports (plain and TLS)."""
    async for server in running_ngircd():
        yield server


@pytest.fixture
async def irc_driver(ngircd: Ngircd) -> AsyncIterator[PlatformDriver]:
    """Alice on the real ngircd, talking to the bot in private (an IrcDriver)."""
    person = IrcPerson(ngircd.port, "alice")
    await person.connect()
    try:
        yield IrcDriver(ngircd, person)
    finally:
        await person.close()


@pytest.fixture
async def twitch() -> AsyncIterator[FakeIrc]:
    """The fake server speaking Twitch's IRC (PASS oauth:, its tags) on a loopback port."""
    async with FakeIrc(twitch_token=TWITCH_TOKEN) as server:
        yield server


@pytest.fixture
def twitch_driver(twitch: FakeIrc) -> PlatformDriver:
    """Alice in her channel's chat with the bot on the fake Twitch (a TwitchDriver)."""
    return TwitchDriver(twitch)


@pytest.fixture
async def ntfy() -> AsyncIterator[FakeNtfy]:
    """The fake ntfy server on a loopback port (keepalives every second)."""
    async with FakeNtfy() as server:
        yield server


@pytest.fixture
def ntfy_driver(ntfy: FakeNtfy) -> PlatformDriver:
    """The person on the fake ntfy (an NtfyDriver)."""
    return NtfyDriver(ntfy)


@pytest.fixture
async def fake_twilio() -> AsyncIterator[FakeTwilio]:
    """The fake Twilio (REST API and signed webhooks) on a loopback port."""
    async with FakeTwilio() as fake:
        yield fake


@pytest.fixture
def sms_driver(fake_twilio: FakeTwilio) -> PlatformDriver:
    """Alice texting the bot's number through the fake Twilio (an SmsDriver); the table
    points the fake's webhook at the runtime's HTTP server."""
    return SmsDriver(fake_twilio)


@pytest.fixture
async def web_driver() -> AsyncIterator[PlatformDriver]:
    """The person at the dashboard's chat, on the runtime's own HTTP server (a WebDriver);
    the table starts the server and gives the driver its address."""
    driver = WebDriver()
    try:
        yield driver
    finally:
        await driver.close()


# The app-token platforms (Feishu/Lark, DingTalk, WeCom): their fixtures live in a module
# of their own.
from tests.channels.apptoken_fixtures import (  # noqa: E402,F401
    dingtalk_driver,
    fake_dingtalk,
    fake_feishu,
    fake_wecom,
    feishu_driver,
    wecom_driver,
)

# The connection platforms of issue 37 (chatconn): Zulip, Nextcloud Talk, Rocket.Chat
from tests.channels.chatconn_drivers import (  # noqa: E402, F401
    fake_rocketchat,
    fake_talk,
    fake_zulip,
    nextcloud_driver,
    rocketchat_driver,
    zulip_driver,
)

# Mattermost (helper mattermost): its fixtures in a module of its own.
from tests.channels.mattermost_fixtures import (  # noqa: E402, F401
    fake_mattermost,
    mattermost_driver,
)

# The Meta platforms (WhatsApp Cloud, ...): their fixtures live in a module of their own.
from tests.channels.metagraph_drivers import (  # noqa: E402
    fake_instagram,  # noqa: F401
    fake_messenger,  # noqa: F401
    fake_wa_agent,  # noqa: F401
    fake_whatsappcloud,  # noqa: F401
    instagram_driver,  # noqa: F401
    messenger_driver,  # noqa: F401
    whatsappagent_driver,  # noqa: F401
    whatsappcloud_driver,  # noqa: F401
)

# Microsoft Teams and Google Chat (helper msbots).
from tests.channels.msbots_drivers import (  # noqa: E402, F401
    fake_googlechat,
    fake_teams,
    googlechat_driver,
    teams_driver,
)

# LINE and BlueBubbles (their own module, so each platform's fixtures merge apart).
from tests.channels.webhooks2_fixtures import (  # noqa: E402, F401
    bluebubbles_driver,
    fake_bluebubbles,
    fake_line,
    line_driver,
)
