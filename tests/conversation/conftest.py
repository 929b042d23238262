"""The surfaces' fixtures: the HTTP server (`serve`); the fake Bot API (`tg`) is shared
by every test (tests/conftest.py)."""

from tests.server.conftest import serve

__all__ = ["serve"]
