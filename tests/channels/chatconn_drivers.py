"""The one-table drivers of the chatconn platforms of issue 37 (Zulip, Nextcloud Talk,
Rocket.Chat), imported by tests/channels/conftest.py: one fixture each, `<kind>_driver`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_rocketchat import FakeRocketChat, RocketDriver
from tests.channels.fake_talk import FakeTalk, TalkDriver
from tests.channels.fake_zulip import FakeZulip, ZulipDriver
from tests.channels.platform_driver import PlatformDriver

__all__ = [
    "fake_rocketchat",
    "fake_talk",
    "fake_zulip",
    "nextcloud_driver",
    "rocketchat_driver",
    "zulip_driver",
]


@pytest.fixture
async def fake_zulip() -> AsyncIterator[FakeZulip]:
    """The fake Zulip server on a loopback port (a heartbeat after a second of quiet)."""
    async with FakeZulip() as server:
        yield server


@pytest.fixture
def zulip_driver(fake_zulip: FakeZulip) -> PlatformDriver:
    """Alice in a direct message with the bot on the fake Zulip (a ZulipDriver)."""
    return ZulipDriver(fake_zulip)


@pytest.fixture
async def fake_talk() -> AsyncIterator[FakeTalk]:
    """The fake Nextcloud Talk (bot API and webhook caller) on a loopback port."""
    async with FakeTalk() as talk:
        yield talk


@pytest.fixture
def nextcloud_driver(fake_talk: FakeTalk) -> PlatformDriver:
    """Alice in the bot's Talk conversation; Talk calls our HTTP server (a TalkDriver)."""
    return TalkDriver(fake_talk)


@pytest.fixture
async def fake_rocketchat() -> AsyncIterator[FakeRocketChat]:
    """The fake Rocket.Chat (DDP realtime and REST) on a loopback port."""
    async with FakeRocketChat() as server:
        yield server


@pytest.fixture
def rocketchat_driver(fake_rocketchat: FakeRocketChat) -> PlatformDriver:
    """Alice in a direct message with the bot on the fake Rocket.Chat (a RocketDriver)."""
    return RocketDriver(fake_rocketchat)
