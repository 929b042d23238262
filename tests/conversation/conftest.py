"""The surfaces' fixtures: the fake Bot API (`tg`) and the HTTP server (`serve`)."""

from tests.channels.test_telegram_e2e import tg
from tests.server.conftest import serve

__all__ = ["serve", "tg"]
