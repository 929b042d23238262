"""The drivers of Microsoft Teams and Google Chat for the one-table test
(tests/channels/test_every_platform.py), imported by tests/channels/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_googlechat import FakeGoogleChat, GoogleChatDriver
from tests.channels.fake_teams import FakeTeams, TeamsDriver
from tests.channels.platform_driver import PlatformDriver


@pytest.fixture
async def fake_teams() -> AsyncIterator[FakeTeams]:
    """The fake Bot Framework (login, keys, Connector) on a loopback port."""
    async with FakeTeams() as fake:
        yield fake


@pytest.fixture
def teams_driver(fake_teams: FakeTeams) -> PlatformDriver:
    """Alice in a personal chat with the bot on the fake Teams (a TeamsDriver); the table
    points the fake's Connector at the runtime's HTTP server."""
    return TeamsDriver(fake_teams)


@pytest.fixture
async def fake_googlechat() -> AsyncIterator[FakeGoogleChat]:
    """The fake Google Chat (keys, token endpoint, Chat API) on a loopback port."""
    async with FakeGoogleChat() as fake:
        yield fake


@pytest.fixture
def googlechat_driver(fake_googlechat: FakeGoogleChat) -> PlatformDriver:
    """Alice in a direct message with the app on the fake Google Chat (a
    GoogleChatDriver); the table points the fake at the runtime's HTTP server."""
    return GoogleChatDriver(fake_googlechat)
