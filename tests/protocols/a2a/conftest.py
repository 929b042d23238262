"""Fixtures for the A2A server tests here: the HTTP server fixture (tests/server)."""

from __future__ import annotations

from tests.server.conftest import serve as serve
