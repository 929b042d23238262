"""The LINE and BlueBubbles fixtures of the one-table test (imported by
tests/channels/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_bluebubbles import BlueBubblesDriver, FakeBlueBubbles
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


@pytest.fixture
async def fake_bluebubbles() -> AsyncIterator[FakeBlueBubbles]:
    """The fake BlueBubbles server (REST API and webhooks) on a loopback port."""
    async with FakeBlueBubbles() as fake:
        yield fake


@pytest.fixture
def bluebubbles_driver(fake_bluebubbles: FakeBlueBubbles) -> PlatformDriver:
    """Alice in her iMessage chat with the bot through the fake BlueBubbles server; the
    table points the server's webhook at the runtime's HTTP server."""
    return BlueBubblesDriver(fake_bluebubbles)
