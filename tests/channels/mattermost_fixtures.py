"""The one-table driver of Mattermost (issue 37), imported by tests/channels/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_mattermost import FakeMattermost, MattermostDriver
from tests.channels.platform_driver import PlatformDriver

__all__ = ["fake_mattermost", "mattermost_driver"]


@pytest.fixture
async def fake_mattermost() -> AsyncIterator[FakeMattermost]:
    """The fake Mattermost (REST v4 and the WebSocket) on a loopback port."""
    async with FakeMattermost() as server:
        yield server


@pytest.fixture
def mattermost_driver(fake_mattermost: FakeMattermost) -> PlatformDriver:
    """Alice in a direct message with the bot on the fake Mattermost (a MattermostDriver)."""
    return MattermostDriver(fake_mattermost)
