"""The platform drivers of the one-table test (tests/channels/test_every_platform.py): one
fixture per platform, named `<kind>_driver`, giving a PlatformDriver on its fake."""

from __future__ import annotations

import pytest

from tests.channels.fake_telegram import FakeTelegram
from tests.channels.platform_driver import PlatformDriver
from tests.channels.telegram_driver import TelegramDriver

# Each fixture is typed PlatformDriver, so mypy checks its driver against the Protocol.


@pytest.fixture
def telegram_driver(tg: FakeTelegram) -> PlatformDriver:
    """The person on the fake Telegram Bot API (the shared `tg` fixture)."""
    return TelegramDriver(tg)
