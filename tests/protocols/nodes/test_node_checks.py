"""`habakkuk doctor`'s nodes line (paired and online counts from nodes.db) and the
security audit's finding for device commands that run programs allowed unasked."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home
from habakkuk.engine.storage import open_storage
from habakkuk.protocols.nodes.store import NodeStore
from habakkuk.services.audit import DiskUsage, audit
from habakkuk.services.doctor import Check, run_checks
from tests.conftest import WriteConfig, mock_config

NODES = "http: {}\nnodes:\n  heartbeat: 1s\n  allow:\n    phone: [system.notify]\n"


async def node_checks(home: Home) -> list[Check]:
    return [check for check in await run_checks(home) if check.name == "nodes"]


async def pair(home: Home, name: str, *, holder: str, seen: float) -> None:
    """Pair `name` in the home's nodes.db as the server would, last seen at `seen`."""
    store = await NodeStore.open_on(open_storage(home, load_config(home)))
    try:
        code = await store.new_code(600)
        assert await store.redeem(code.code, name, "linux", ["system.notify"]) is not None
        await store.seen(name, "linux", ["system.notify"], seen, holder)
    finally:
        await store.close()


async def test_doctor_counts_the_paired_nodes_and_those_online(
    home: Home, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANG", "C.UTF-8")
    write_config(mock_config())
    assert await node_checks(home) == []  # no nodes: section, no line
    write_config(mock_config(extra=NODES))
    (none,) = await node_checks(home)
    assert none.status == "WARN" and "habakkuk node pair" in none.detail
    await pair(home, "phone", holder="host:1:a", seen=time.time())
    await pair(home, "laptop", holder="host:2:b", seen=time.time() - 3600)  # gone quiet
    (counted,) = await node_checks(home)
    assert counted.status == "ok"
    assert counted.detail.startswith("2 paired, 1 online (devices connect to http://")


def test_the_audit_flags_device_commands_that_run_programs_unasked(
    home: Home, write_config: WriteConfig, tmp_path: Path
) -> None:
    def nodes_found() -> list[tuple[str, str, str]]:
        found = audit(
            home,
            load_config(home),
            cwd=tmp_path,
            env=os.environ.get,
            disk=lambda _: DiskUsage(10**11, 10**10, 9 * 10**10),
        )
        return [(f.severity, f.subject, f.problem) for f in found if f.check == "nodes"]

    write_config(mock_config(extra=NODES))
    assert nodes_found() == []  # a notification is harmless
    risky = NODES + "    laptop: [system.run, files.get]\n    '*': ['*']\n"
    write_config(mock_config(extra=risky))
    assert [(severity, subject) for severity, subject, _ in nodes_found()] == [
        ("high", "nodes.allow.*"),
        ("high", "nodes.allow.laptop"),
    ]
    problems = [problem for _, _, problem in nodes_found()]
    assert "system.run, camera.snap, files.put run on all nodes" in problems[0]
    assert problems[1] == "device commands system.run run on laptop without asking"
