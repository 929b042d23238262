"""The one-table drivers of the connection platforms of issue 37 (Zulip, ...), imported by
tests/channels/conftest.py: one fixture per platform, `<kind>_driver`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_zulip import FakeZulip, ZulipDriver
from tests.channels.platform_driver import PlatformDriver

__all__ = ["fake_zulip", "zulip_driver"]


@pytest.fixture
async def fake_zulip() -> AsyncIterator[FakeZulip]:
    """The fake Zulip server on a loopback port (a heartbeat after a second of quiet)."""
    async with FakeZulip() as server:
        yield server


@pytest.fixture
def zulip_driver(fake_zulip: FakeZulip) -> PlatformDriver:
    """Alice in a direct message with the bot on the fake Zulip (a ZulipDriver)."""
    return ZulipDriver(fake_zulip)
