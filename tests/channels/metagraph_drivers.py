"""The Meta platforms' drivers for the one-table test (tests/channels/test_every_platform.py),
imported by tests/channels/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from habakkuk.channels import whatsappagent
from tests.channels.fake_graph import FakeWhatsAppCloud, WhatsAppCloudDriver
from tests.channels.fake_messenger import FakeMessenger, MessengerDriver
from tests.channels.fake_wa_agent import QUICK_SPACING, AgentDriver, FakeAgentPlatform
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


@pytest.fixture
async def fake_messenger() -> AsyncIterator[FakeMessenger]:
    """The fake Messenger Platform (Send API and signed webhooks) on a loopback port."""
    async with FakeMessenger("messenger") as fake:
        yield fake


@pytest.fixture
def messenger_driver(fake_messenger: FakeMessenger) -> PlatformDriver:
    """Alice writing to the Page through the fake Messenger Platform."""
    return MessengerDriver(fake_messenger)


@pytest.fixture
async def fake_instagram() -> AsyncIterator[FakeMessenger]:
    """The fake Instagram messaging (Send API and signed webhooks) on a loopback port."""
    async with FakeMessenger("instagram") as fake:
        yield fake


@pytest.fixture
def instagram_driver(fake_instagram: FakeMessenger) -> PlatformDriver:
    """Alice writing to the Instagram account through the fake."""
    return MessengerDriver(fake_instagram)


@pytest.fixture
async def fake_wa_agent() -> AsyncIterator[FakeAgentPlatform]:
    """The fake WhatsApp agent platform (long-polled updates) on a loopback port."""
    async with FakeAgentPlatform() as fake:
        yield fake


@pytest.fixture
def whatsappagent_driver(
    fake_wa_agent: FakeAgentPlatform, monkeypatch: pytest.MonkeyPatch
) -> PlatformDriver:
    """Alice writing to the agent through the fake platform (polls spaced quickly: the
    spacing has its own test in tests/channels/test_whatsappagent.py)."""
    monkeypatch.setattr(whatsappagent, "POLL_SPACING", QUICK_SPACING)
    return AgentDriver(fake_wa_agent)
