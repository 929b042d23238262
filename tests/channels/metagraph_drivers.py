"""The Meta platforms' drivers for the one-table test (tests/channels/test_every_platform.py),
imported by tests/channels/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.fake_graph import FakeWhatsAppCloud, WhatsAppCloudDriver
from tests.channels.platform_driver import PlatformDriver


@pytest.fixture
async def fake_whatsappcloud() -> AsyncIterator[FakeWhatsAppCloud]:
    """The fake WhatsApp Cloud API (Graph and signed webhooks) on a loopback port."""
    async with FakeWhatsAppCloud() as fake:
        yield fake


@pytest.fixture
def whatsappcloud_driver(fake_whatsappcloud: FakeWhatsAppCloud) -> PlatformDriver:
    """Alice writing to the business number through the fake Cloud API; the table points
    the app's webhook at the runtime's HTTP server."""
    return WhatsAppCloudDriver(fake_whatsappcloud)
