"""A real `habakkuk node run` process paired with the server on 127.0.0.1: it is invoked
through node_invoke (notify and files), then revoked from a second process and cut off
within one heartbeat (nodes.heartbeat: 1s here)."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from pathlib import Path

import pytest

from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.approvals import ApprovalDecision, ApprovalRequest
from habakkuk.protocols.nodes.store import digest
from tests.conftest import mock_config
from tests.helpers import eventually, tool_context
from tests.processes import BOUND
from tests.protocols.nodes.conftest import NODES
from tests.protocols.nodes.helpers import cli, node_run, stub_program, until_line
from tests.server.conftest import ServeFactory


class Allow:
    """An approver that allows every call and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision("allow_once")


@pytest.mark.timeout(180)
async def test_a_paired_node_process_runs_commands_and_a_revoke_from_another_process_cuts_it(
    serve: ServeFactory, home: Home, tmp_path: Path
) -> None:
    served = await serve(mock_config(extra=NODES))
    runtime = served.runtime
    code, out, err = await cli(home.root, "node", "pair")
    assert code == 0, err
    found = re.search(r"Pairing code: ([A-Z0-9]{10})", out)
    assert found is not None, out
    assert f"/app/pair.html#{found[1]}" in out and "habakkuk node run --server" in out

    device, shared, bin_dir = tmp_path / "device", tmp_path / "shared", tmp_path / "bin"
    shared.mkdir()
    (shared / "notes.txt").write_text("milk, eggs", encoding="utf-8")
    record = tmp_path / "notified.txt"
    stub_program(bin_dir, "notify-send", record)
    node = await node_run(
        device, "--server", served.url, "--code", found[1], "--name", "laptop",
        "--dir", str(shared), path_first=bin_dir,
    )  # fmt: skip
    try:
        lines = await until_line(node, "Connected to")
        assert "system.notify" in lines[-1] and "files.get" in lines[-1]
        # The secret stays on the device (node.json, 0600); the server holds its hash only.
        identity = json.loads((device / "node.json").read_text(encoding="utf-8"))
        assert stat.S_IMODE((device / "node.json").stat().st_mode) == 0o600
        stored = (home.root / "nodes.db").read_bytes() + _wal(home.root / "nodes.db")
        assert identity["secret"].encode() not in stored
        assert digest(identity["secret"]).encode() in stored
        listed = await served.get_json("/api/nodes")
        assert [(n["name"], n["online"]) for n in listed["nodes"]] == [("laptop", True)]

        ctx = tool_context(tmp_path, mode="workspace")
        allowed = {"node_invoke", "nodes_list"}
        notify = ToolUseBlock(
            "t1", "node_invoke",
            {"node": "laptop", "command": "system.notify",
             "args": {"title": "Reminder", "body": "buy milk"}},
        )  # fmt: skip
        result = (await runtime.tools.call_with_media(notify, ctx, allowed)).result
        assert not result.is_error, result.text
        assert record.read_text(encoding="utf-8").splitlines() == ["--", "Reminder", "buy milk"]

        get = ToolUseBlock(
            "t2", "node_invoke",
            {"node": "laptop", "command": "files.get", "args": {"path": "notes.txt"}},
        )  # fmt: skip
        result = (await runtime.tools.call_with_media(get, ctx, allowed)).result
        assert not result.is_error, result.text
        saved = ctx.workspace / "nodes" / "laptop" / "notes.txt"
        assert saved.read_text(encoding="utf-8") == "milk, eggs"
        assert ctx.taint.tainted  # what a device returns is outside content

        # files.put is not in nodes.allow: unattended, it is denied; approved, it runs.
        (ctx.workspace / "report.txt").write_text("done", encoding="utf-8")
        put_args = {"node": "laptop", "command": "files.put",
                    "args": {"path": "in/report.txt", "from": "report.txt"}}  # fmt: skip
        put = ToolUseBlock("t3", "node_invoke", put_args)
        denied = (await runtime.tools.call_with_media(put, ctx, allowed)).result
        assert denied.is_error and "denied" in denied.text
        assert not (shared / "in" / "report.txt").exists()
        person = Allow()
        ctx.approver = person
        put = ToolUseBlock("t4", "node_invoke", put_args)
        result = (await runtime.tools.call_with_media(put, ctx, allowed)).result
        assert not result.is_error, result.text
        assert (shared / "in" / "report.txt").read_text(encoding="utf-8") == "done"
        assert [r.summary for r in person.asked] == ["run files.put on device laptop"]

        # Revoked by another process: the server cuts the node at its next heartbeat,
        # and the node stops retrying.
        code, out, err = await cli(home.root, "nodes", "revoke", "laptop")
        assert code == 0, err
        await asyncio.wait_for(node.wait(), BOUND)
        rest = (await node.stdout.read()).decode() if node.stdout is not None else ""
        problem = (await node.stderr.read()).decode() if node.stderr is not None else ""
        assert node.returncode == 1
        assert "cut this node off" in problem, rest + problem
        hub = runtime.devices
        assert hub is not None
        await eventually(lambda: "laptop" not in hub.live, what="the node cut")
        assert (await served.get_json("/api/nodes"))["nodes"] == []
    finally:
        if node.returncode is None:
            node.kill()
        await node.communicate()


def _wal(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""
