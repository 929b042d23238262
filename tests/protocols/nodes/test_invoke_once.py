"""One turn's node_invoke call reaches the device once: the same call of the same turn
(a turn resumed after a crash runs its unfinished calls again, with the same ids) gets
the first answer back and the device is not told twice."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from habakkuk.engine.home import Home
from habakkuk.protocols.nodes.relay import NODE_INVOKE_KIND, call_id_for
from habakkuk.protocols.nodes.tools import NodeInvoke
from tests.conftest import mock_config
from tests.protocols.nodes.conftest import NODES
from tests.protocols.nodes.helpers import cli, node_run, stub_program, until_line
from tests.server.conftest import ServeFactory


@pytest.mark.timeout(180)
async def test_the_same_call_of_the_same_turn_notifies_once_and_answers_twice(
    serve: ServeFactory, home: Home, tmp_path: Path
) -> None:
    served = await serve(mock_config(extra=NODES))
    hub = served.runtime.devices
    assert hub is not None
    code, out, err = await cli(home.root, "node", "pair")
    assert code == 0, err
    found = re.search(r"Pairing code: ([A-Z0-9]{10})", out)
    assert found is not None, out
    record, bin_dir = tmp_path / "notified.txt", tmp_path / "bin"
    stub_program(bin_dir, "notify-send", record)
    node = await node_run(
        tmp_path / "device", "--server", served.url, "--code", found[1], "--name", "laptop",
        path_first=bin_dir,
    )  # fmt: skip
    try:
        await until_line(node, "Connected to")
        args = {"title": "Reminder", "body": "buy milk"}
        first = await hub.invoke("laptop", "system.notify", args, 10, ("turn_1", "toolu_1"))
        again = await hub.invoke("laptop", "system.notify", args, 10, ("turn_1", "toolu_1"))
        assert not first.error and again == first
        assert record.read_text(encoding="utf-8").splitlines() == ["--", "Reminder", "buy milk"]
        job = await served.runtime.queue.get(call_id_for("turn_1", "toolu_1"))
        assert job is not None and job.kind == NODE_INVOKE_KIND and job.status == "done"

        # Another call of that turn is another notification.
        await hub.invoke("laptop", "system.notify", args, 10, ("turn_1", "toolu_2"))
        assert len(record.read_text(encoding="utf-8").splitlines()) == 6
        assert NodeInvoke.resumable  # a resumed turn runs the call again, with its id
    finally:
        if node.returncode is None:
            node.kill()
        await node.communicate()
