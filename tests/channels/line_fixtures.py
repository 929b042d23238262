"""The LINE fixtures of the one-table test (imported by tests/channels/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_line import FakeLine, LineDriver
from tests.channels.platform_driver import PlatformDriver


@pytest.fixture
async def fake_line() -> AsyncIterator[FakeLine]:
    """The fake LINE Platform (Messaging API and signed webhooks) on a loopback port."""
    async with FakeLine() as fake:
        yield fake


@pytest.fixture
def line_driver(fake_line: FakeLine) -> PlatformDriver:
    """Alice in a one-to-one chat with the bot on the fake LINE (a LineDriver); the table
    points the fake's webhook at the runtime's HTTP server."""
    return LineDriver(fake_line)
