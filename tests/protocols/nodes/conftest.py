"""Fixtures for device nodes: the HTTP server fixture (tests/server) and a node config."""

from __future__ import annotations

from tests.server.conftest import serve as serve

# A one-second heartbeat: a revoke from another process cuts a node within a second.
NODES = "nodes:\n  heartbeat: 1s\n  allow:\n    laptop: [system.notify, files.get]\n"
