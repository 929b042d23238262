"""No command outlives the turn that ran it: a Habakkuk killed with -9 mid-command leaves
the command running (here, in its container or on its remote host), and the next start
kills it from the record under run/commands. Counted from the process table."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.home import Home
from habakkuk.tools.processes import ProcessManager
from habakkuk.tools.sandbox.groups import CommandGroups
from habakkuk.tools.sandbox.ssh import SshSandbox
from habakkuk.tools.shell import run_command
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually
from tests.tools.sandbox.conftest import FakeDocker, SshWorld, running_with, sleep_marker
from tests.tools.sandbox.crash_child import One, sandbox_of

ROOT = Path(__file__).resolve().parents[3]


async def crash_mid_command(spec: dict[str, str], marker: str) -> None:
    """Run the child until its command runs (seen in the process table), then kill -9 it;
    the command must still run afterwards (what the next start has to clean up)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.tools.sandbox.crash_child",
        json.dumps(spec),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    assert await child.stdout.readline() == b"started\n"
    await eventually(lambda: running_with(marker), what="the command", timeout=PROCESS_BOUND)
    await eventually(
        lambda: list(Path(spec["groups"]).glob("c_*.json")), what="the command's record"
    )
    child.send_signal(signal.SIGKILL)
    await child.wait()
    assert running_with(marker), "the command died with its Habakkuk: nothing to test"


def spec_for(tmp_path: Path, kind: str, command: str, background: bool) -> dict[str, str]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    spec = {
        "kind": kind,
        "workspace": str(workspace),
        "groups": str(tmp_path / "run" / "commands"),
        "procs": str(tmp_path / "procs"),
        "command": command,
    }
    if background:
        spec["background"] = "yes"
    return spec


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
async def test_a_local_command_of_a_killed_habakkuk_is_killed_at_the_next_start(
    tmp_path: Path, background: bool
) -> None:
    marker = sleep_marker()
    spec = spec_for(tmp_path, "none", f"sleep {marker} & sleep {marker}", background)
    await crash_mid_command(spec, marker)
    manager = ProcessManager(
        tmp_path / "procs2",
        sandboxes=One(sandbox_of(spec)),
        groups=CommandGroups(Path(spec["groups"])),
    )
    ended = await manager.kill_orphans()
    assert len(ended) == 1
    await eventually(lambda: not running_with(marker), what="the orphaned command to end")
    assert not list(Path(spec["groups"]).glob("*.json"))


async def test_the_commands_of_a_live_habakkuk_are_left_alone(tmp_path: Path) -> None:
    marker = sleep_marker()
    groups = CommandGroups(tmp_path / "run" / "commands")
    spec = spec_for(tmp_path, "none", f"sleep {marker}", False)
    running = asyncio.create_task(
        run_command(spec["command"], Path(spec["workspace"]), timeout=600, groups=groups)
    )
    try:
        await eventually(lambda: running_with(marker), what="the command")
        await eventually(lambda: list(groups.folder.glob("c_*.json")), what="its record")
        # Another Habakkuk starting beside this one (a terminal app beside --serve).
        assert await CommandGroups(groups.folder).kill_orphans(One(sandbox_of(spec))) == []
        assert running_with(marker)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    await eventually(lambda: not running_with(marker), what="the cancelled command to end")
    assert not list(groups.folder.glob("*.json"))


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
async def test_a_command_in_the_container_of_a_killed_habakkuk_is_killed_at_the_next_start(
    tmp_path: Path, fake_docker: FakeDocker, background: bool
) -> None:
    marker = sleep_marker()
    spec = spec_for(tmp_path, "docker", f"sleep {marker} & sleep {marker}", background)
    await crash_mid_command(spec, marker)
    groups = CommandGroups(Path(spec["groups"]))
    assert len(await groups.kill_orphans(One(sandbox_of(spec)))) == 1
    await eventually(lambda: not running_with(marker), what="the container's command to end")
    kills = [c for c in fake_docker.calls("exec") if "bash" in c and "KILL" in c]
    assert kills, "the command was not ended inside the container"


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
async def test_a_remote_command_of_a_killed_habakkuk_is_killed_at_the_next_start(
    tmp_path: Path, ssh_world: SshWorld, background: bool
) -> None:
    marker = sleep_marker()
    spec = spec_for(tmp_path, "ssh", f"sleep {marker} & sleep {marker}", background)
    spec["workspace"] = str(ssh_world.workspace)
    spec |= {
        "workdir": str(ssh_world.workdir),
        "port": str(ssh_world.server.port),
        "user": ssh_world.server.user,
        "key": str(ssh_world.server.client_key),
        "ssh_dir": str(ssh_world.home / "ssh"),
    }
    await crash_mid_command(spec, marker)
    sandbox = sandbox_of(spec)
    assert isinstance(sandbox, SshSandbox)
    try:
        assert len(await CommandGroups(Path(spec["groups"])).kill_orphans(One(sandbox))) == 1
        await eventually(lambda: not running_with(marker), what="the remote command to end")
    finally:
        await sandbox.close()


async def test_opening_the_runtime_ends_what_a_killed_habakkuk_left_running(
    tmp_path: Path, runtime_factory: Any, home: Home
) -> None:
    marker = sleep_marker()
    spec = spec_for(tmp_path, "none", f"sleep {marker}", False)
    spec["groups"] = str(home.run_dir / "commands")  # where the runtime looks
    await crash_mid_command(spec, marker)
    await runtime_factory(mock_config())
    await eventually(lambda: not running_with(marker), what="the orphan to end at start")
    assert not list((home.run_dir / "commands").glob("*.json"))


class HeldGroups(CommandGroups):
    """Command groups whose record of a start waits until the test lets it go: the moment
    a turn may be cancelled in."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.entered = threading.Event()
        self.release = threading.Event()

    def started(self, token: str, pgid: int, *, agent: str, kind: str) -> None:
        self.entered.set()
        self.release.wait(PROCESS_BOUND)
        super().started(token, pgid, agent=agent, kind=kind)


async def test_a_command_cancelled_while_its_group_is_recorded_is_killed_and_forgotten(
    tmp_path: Path,
) -> None:
    marker = sleep_marker()
    groups = HeldGroups(tmp_path / "run" / "commands")
    running = asyncio.create_task(
        run_command(f"sleep {marker}", tmp_path, timeout=600, groups=groups)
    )
    await eventually(groups.entered.is_set, what="the group being recorded")
    await eventually(lambda: running_with(marker), what="the command")
    running.cancel()
    groups.release.set()
    with pytest.raises(asyncio.CancelledError):
        await running
    await eventually(lambda: not running_with(marker), what="the cancelled command to end")
    assert not list(groups.folder.glob("*.json"))
