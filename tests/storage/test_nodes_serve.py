"""A real `habakkuk --serve` registers its node (host, pid, the agents it hosts), other
processes of the home see it, and a clean stop removes it."""

from __future__ import annotations

from pathlib import Path

from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.nodes import NodeRegistry
from habakkuk.engine.storage import SqliteStorage
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually
from tests.processes import StartServe, stop, until_serving


async def test_a_serving_node_is_seen_by_others_and_gone_after_a_clean_stop(
    tmp_path: Path, serve_process: StartServe
) -> None:
    root = tmp_path / "home"
    home = Home(root)
    home.prepare()
    home.config_path.write_text(mock_config() + "  ops:\n    model: mock/x\n", encoding="utf-8")
    process = await serve_process(root, flags=("--agents", "ops"), HABAKKUK_HOSTNAME="alpha")
    said = "".join(await until_serving(process))
    assert "on alpha" in said and "hosting ops" in said
    db = SqliteStorage(home).open_sync(CONTROL)
    try:
        reader = NodeRegistry(db, host="reader", pid=1)

        async def registered() -> bool:
            return any(node.host == "alpha" for node in await reader.nodes())

        await eventually(registered, what="the node to register", timeout=PROCESS_BOUND)
        [node] = await reader.nodes()
        assert (node.pid, node.agents, node.stale, node.here) == (
            process.pid,
            ("ops",),
            False,
            False,
        )
        await stop(process)
        assert await reader.nodes() == []
    finally:
        await db.close()
