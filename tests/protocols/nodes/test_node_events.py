"""A node's life on the events bus (the terminal and the dashboard follow it): paired,
connected, then revoked and disconnected, each a typed NodeChanged."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from habakkuk.engine.events import NodeChanged
from habakkuk.engine.home import Home
from tests.conftest import mock_config
from tests.processes import BOUND
from tests.protocols.nodes.conftest import NODES
from tests.protocols.nodes.helpers import cli, node_run, until_line
from tests.server.conftest import ServeFactory


@pytest.mark.timeout(120)
async def test_pairing_connecting_and_revoking_a_node_are_told_on_the_bus(
    serve: ServeFactory, home: Home, tmp_path: Path
) -> None:
    served = await serve(mock_config(extra=NODES))
    runtime = served.runtime
    hub = runtime.devices
    assert hub is not None
    heard = runtime.bus.subscribe(lambda event: isinstance(event, NodeChanged))
    code, out, err = await cli(home.root, "node", "pair")
    assert code == 0, err
    found = re.search(r"Pairing code: ([A-Z0-9]{10})", out)
    assert found is not None, out
    node = await node_run(
        tmp_path / "device", "--server", served.url, "--code", found[1], "--name", "laptop"
    )
    try:
        await until_line(node, "Connected to")
        assert await hub.revoke("laptop")
        await asyncio.wait_for(node.wait(), BOUND)
        events = [await asyncio.wait_for(heard.get(), BOUND) for _ in range(4)]
    finally:
        if node.returncode is None:
            node.kill()
        await node.communicate()
    assert all(isinstance(event, NodeChanged) for event in events)
    changes = [(e.node, e.change) for e in events if isinstance(e, NodeChanged)]
    assert changes == [
        ("laptop", "paired"),
        ("laptop", "connected"),
        ("laptop", "revoked"),
        ("laptop", "disconnected"),
    ]
    connected = events[1]
    assert isinstance(connected, NodeChanged) and connected.platform.startswith("linux")
    assert connected.to_json()["data"]["platform"] == connected.platform
