"""The platform drivers of the one-table test (tests/channels/test_every_platform.py): one
fixture per platform, named `<kind>_driver`, giving a PlatformDriver on its fake."""

from __future__ import annotations

import pytest

from tests.channels.fake_telegram import FakeTelegram
from tests.channels.telegram_driver import TelegramDriver


@pytest.fixture
def telegram_driver(tg: FakeTelegram) -> TelegramDriver:
    """The person on the fake Telegram Bot API (the shared `tg` fixture)."""
    return TelegramDriver(tg)
