"""node_invoke from a process that does not hold the node: a real `habakkuk --serve` holds
a real `habakkuk node run` (notify-send stubbed on PATH), and `habakkuk run` in a second
process, its scripted mock model calling node_invoke, notifies it through the job queue.
Once the node is gone, the same call is a clear error result."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from asyncio.subprocess import Process
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import mock_config
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, free_port, query, stop, until_http
from tests.protocols.nodes.helpers import cli, node_run, stub_program, until_line

SCRIPT = """
- text: "Notifying."
  tool_calls:
    - name: node_invoke
      arguments:
        node: phone
        command: system.notify
        args: {title: Reminder, body: buy milk}
- after: {ok: "NOTIFIED", error: "NODE CALL FAILED"}
"""


def config(port: int) -> str:
    """The home: HTTP on `port`, nodes with system.notify allowed on `phone`."""
    extra = (
        f"http:\n  listen: 127.0.0.1:{port}\n"
        "nodes:\n  heartbeat: 1s\n  allow:\n    phone: [system.notify]\n"
    )
    return mock_config(SCRIPT, extra=extra)


def tool_results(home: Path) -> list[str]:
    """The tool results in the home's transcripts, as stored JSON."""
    with contextlib.closing(sqlite3.connect(home / "transcripts.db")) as conn:
        rows = conn.execute("SELECT blocks FROM messages WHERE blocks LIKE '%tool_result%'")
        return [str(row[0]) for row in rows.fetchall()]


@dataclass(frozen=True)
class Paired:
    """A serving home and the phone node paired to it, connected."""

    home: Path
    server: Process
    node: Process
    record: Path  # what the phone's stubbed notify-send was called with


@contextlib.asynccontextmanager
async def paired_phone(tmp_path: Path, serve_process: StartServe) -> AsyncIterator[Paired]:
    """A real `--serve` and a real `node run` named phone, paired with a code from
    `habakkuk node pair`; both ended on the way out."""
    home, device, bin_dir = tmp_path / "home", tmp_path / "device", tmp_path / "bin"
    home.mkdir()
    port = free_port()
    (home / "config.yaml").write_text(config(port), encoding="utf-8")
    server = await serve_process(home)
    await until_http(server)
    code, out, err = await cli(home, "node", "pair")
    assert code == 0, err
    found = re.search(r"Pairing code: ([A-Z0-9]{10})", out)
    assert found is not None, out
    record = tmp_path / "notified.txt"
    stub_program(bin_dir, "notify-send", record)
    node = await node_run(
        device, "--server", f"http://127.0.0.1:{port}", "--code", found[1],
        "--name", "phone", path_first=bin_dir,
    )  # fmt: skip
    try:
        await until_line(node, "Connected to")
        yield Paired(home, server, node, record)
    finally:
        if node.returncode is None:
            node.kill()
            await node.communicate()
    await stop(server)


@pytest.mark.timeout(240)
async def test_a_run_in_another_process_notifies_the_node_the_server_holds(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with paired_phone(tmp_path, serve_process) as paired:
        home, server, node, record = paired.home, paired.server, paired.node, paired.record
        # nodes.db names the --serve process as the node's holder.
        held = query(home / "nodes.db", "SELECT holder FROM nodes WHERE name = 'phone'")
        assert held and str(held[0]["holder"]).split(":")[1] == str(server.pid)

        code, out, err = await cli(home, "run", "buy milk")
        assert code == 0, err
        assert "NOTIFIED" in out, out + err
        assert record.read_text(encoding="utf-8").splitlines() == ["--", "Reminder", "buy milk"]
        jobs = query(home / "control.db", "SELECT status FROM jobs WHERE kind = 'node_invoke'")
        assert [row["status"] for row in jobs] == ["done"]

        # The node goes away: a call from another process is an error result, at once.
        node.terminate()
        await asyncio.wait_for(node.communicate(), BOUND)

        def let_go() -> bool:
            rows = query(home / "nodes.db", "SELECT holder FROM nodes WHERE name = 'phone'")
            return bool(rows) and rows[0]["holder"] == ""

        await eventually(let_go, what="the server to let the node go", timeout=BOUND)
        code, out, err = await cli(home, "run", "call again")
        assert code == 0, err
        assert "NODE CALL FAILED" in out, out + err
        assert any("node 'phone' is not connected" in text for text in tool_results(home))
        assert record.read_text(encoding="utf-8").splitlines() == ["--", "Reminder", "buy milk"]


@pytest.mark.timeout(240)
async def test_a_schedule_the_scheduler_fires_notifies_the_phone_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with paired_phone(tmp_path, serve_process) as paired:
        home, record = paired.home, paired.record
        code, _, err = await cli(
            home, "schedules", "add", "--name", "remind", "--when", "@every 15s",
            "--prompt", "remind me to buy milk",
        )  # fmt: skip
        assert code == 0, err
        await eventually(record.exists, what="the scheduled notification", timeout=BOUND)

        def answered() -> bool:
            calls = query(home / "control.db", "SELECT status FROM jobs WHERE kind = 'node_invoke'")
            return [row["status"] for row in calls] == ["done"]

        await eventually(answered, what="the one node_invoke job done", timeout=BOUND)
        assert record.read_text(encoding="utf-8").splitlines() == ["--", "Reminder", "buy milk"]
        code, _, err = await cli(home, "schedules", "pause", "remind")
        assert code == 0, err
