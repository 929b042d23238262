"""A whole turn of an agent whose commands run over ssh: its file writes are refused, it
takes no checkpoint, and an unreachable host fails exec with the reason (never run here)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.home import Home
from habakkuk.services.checkpoints import WorkspaceCheckpoints
from habakkuk.tools.sandbox.sandboxes import HomeSandboxes
from habakkuk.tools.sandbox.ssh import SshSandbox
from tests.conftest import mock_config

SCRIPT = """
- match: "write"
  steps:
    - tool_calls:
        - {name: write_file, arguments: {path: a.txt, content: "A"}}
    - text: "tried"
- match: "run"
  steps:
    - tool_calls:
        - {name: exec, arguments: {command: "touch ran-here"}}
    - text: "ran"
- steps:
    - text: "ok"
"""
# Port 1 of loopback: nothing listens, so every connection is refused.
SSH_AGENT = "    sandbox: ssh\n    ssh: {host: 127.0.0.1, port: 1, workdir: /srv/work}\n"


async def test_an_ssh_agents_turn_refuses_file_writes_takes_no_checkpoint_and_never_runs_here(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config(SCRIPT, mode="full") + SSH_AGENT)
    workspace = runtime.config.agents["main"].workspace_path
    workspace.mkdir(parents=True, exist_ok=True)
    assert isinstance(runtime.processes.sandboxes.for_agent("main"), SshSandbox)
    runtime.start_workers()
    session = await runtime.sessions.new_session()
    for text in ("write", "run"):
        turn = await runtime.turns.submit(session.id, text)
        outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 60)
        assert outcome.status == "done", outcome.error
    results = [
        block
        for stored in await runtime.sessions.messages(session.id)
        for block in stored.raw_blocks
        if block.get("type") == "tool_result"
    ]
    written, ran = (json.dumps(r) for r in results)
    assert "sandbox: ssh" in written and '"is_error": true' in written
    assert "ssh to 127.0.0.1:1 failed" in ran
    assert not (workspace / "a.txt").exists() and not (workspace / "ran-here").exists()
    assert await runtime.checkpointing.for_agent("main").list() == []


def test_an_ssh_agent_takes_no_checkpoints_and_a_local_one_does(tmp_path: Path) -> None:
    home = Home(tmp_path)
    ssh = parse_config(mock_config() + SSH_AGENT, tmp_path / "c.yaml", home)
    local = parse_config(mock_config(), tmp_path / "c.yaml", home)

    def snapshot(config: Config) -> object:
        checkpoints = WorkspaceCheckpoints(config, home, queue=None, sessions=None)  # type: ignore[arg-type]  # never reached: only the decision is asked
        return checkpoints.snapshot_for(config.agents["main"], None, "task")  # type: ignore[arg-type]  # the session is read only when it runs

    assert snapshot(ssh) is None
    assert snapshot(local) is not None
    assert isinstance(HomeSandboxes(ssh, tmp_path).for_agent("main"), SshSandbox)
