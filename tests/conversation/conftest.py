"""The server's `serve` fixture, for the web chat surface."""

from tests.server.conftest import serve

__all__ = ["serve"]
