"""Fixtures of the Home Assistant tests: the HTTP surface's `serve` (a runtime with its
server on a loopback port), for triggers whose replies go to a web conversation."""

from tests.server.conftest import serve  # noqa: F401  # the fixture, shared as it is
