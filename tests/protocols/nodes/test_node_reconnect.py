"""A real `habakkuk node run` beside a real `habakkuk --serve`: paired with the code
`habakkuk node pair` printed, it comes back by itself (jittered backoff) after the server
was killed and started again, with the secret from its node.json and no new code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import mock_config
from tests.helpers import eventually
from tests.processes import StartServe, free_port, kill, stop, until_http
from tests.protocols.nodes.helpers import cli, node_run, until_line

TOKEN = "nodes-token-0123456789"


async def _nodes(url: str) -> list[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as client,
        client.get(url + "/api/nodes", headers={"Authorization": f"Bearer {TOKEN}"}) as got,
    ):
        body: dict[str, list[dict[str, Any]]] = await got.json()
        return body["nodes"]


@pytest.mark.timeout(300)  # two cold starts of serve
async def test_a_node_reconnects_to_a_restarted_server_without_a_new_code(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    extra = (
        f"http:\n  listen: 127.0.0.1:{port}\n  token_env: NODES_TOKEN\nnodes:\n  heartbeat: 1s\n"
    )
    (home / "config.yaml").write_text(mock_config(extra=extra), encoding="utf-8")
    url = f"http://127.0.0.1:{port}"
    server = await serve_process(home, NODES_TOKEN=TOKEN)
    await until_http(server)
    code, out, err = await cli(home, "node", "pair")
    assert code == 0, err
    found = re.search(r"--code ([A-Z0-9]{10})", out)
    assert found is not None, out
    node = await node_run(
        tmp_path / "device", "--server", url, "--code", found[1], "--name", "desk"
    )
    try:
        await until_line(node, "Connected to")
        assert [(n["name"], n["online"]) for n in await _nodes(url)] == [("desk", True)]
        await kill(server)
        await until_line(node, "connecting again in")
        server = await serve_process(home, NODES_TOKEN=TOKEN)
        await until_http(server)
        await until_line(node, "Connected to")  # the same secret, from node.json

        async def online() -> bool:
            return [(n["name"], n["online"]) for n in await _nodes(url)] == [("desk", True)]

        await eventually(online, what="the node online again")
        assert node.returncode is None
    finally:
        if node.returncode is None:
            node.kill()
        await node.communicate()
    await stop(server)
