"""The ssh sandbox against a real sshd on 127.0.0.1 (tests/tools/sandbox/sshd.py): commands
run "there" (another folder of this machine), through one shared connection, under the
wrapper that lets a timeout or process_kill end the whole remote tree."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from habakkuk.tools.processes import ProcessManager
from habakkuk.tools.sandbox.base import SandboxError
from habakkuk.tools.sandbox.ssh import known_fingerprints
from habakkuk.tools.shell import run_command
from tests.helpers import eventually
from tests.tools.sandbox.conftest import (
    KEY_VARIABLE,
    SshWorld,
    running_with,
    sleep_marker,
    sleeping,
)
from tests.tools.sandbox.crash_child import One
from tests.tools.sandbox.sshd import Sshd


async def test_a_command_runs_on_the_remote_in_the_workdir_its_cwd_maps_to(
    ssh_world: SshWorld,
) -> None:
    (ssh_world.workspace / "sub").mkdir()
    (ssh_world.workdir / "sub").mkdir()
    sandbox = ssh_world.sandbox()
    result = await run_command(
        "pwd; touch made-there; exit 3", ssh_world.workspace / "sub", timeout=30, sandbox=sandbox
    )
    assert result.exit_code == 3
    assert result.output.strip() == str(ssh_world.workdir / "sub")
    assert (ssh_world.workdir / "sub" / "made-there").exists()
    assert not (ssh_world.workspace / "sub" / "made-there").exists()


async def test_a_cwd_outside_the_workspace_is_refused(ssh_world: SshWorld) -> None:
    with pytest.raises(SandboxError, match="outside the workspace"):
        await run_command("true", Path("/etc"), timeout=30, sandbox=ssh_world.sandbox())


async def test_commands_share_one_connection_whose_socket_is_under_the_home(
    sshd: Sshd,
) -> None:
    # A short home: the socket's path fits under it.
    root = Path(tempfile.mkdtemp(prefix="hk-", dir="/tmp"))
    world = SshWorld(root, sshd)
    sandbox = world.sandbox()
    try:
        for _ in range(3):
            result = await run_command("echo ok", world.workspace, timeout=30, sandbox=sandbox)
            assert result.output == "ok\n"
        sockets = [p for p in (world.home / "ssh").iterdir() if p.name.startswith("cm-")]
        assert len(sockets) == 1 and sockets[0].is_socket()
        assert (world.home / "ssh").stat().st_mode & 0o777 == 0o700
    finally:
        await sandbox.close()
        shutil.rmtree(root)


def test_a_home_too_deep_for_a_socket_keeps_it_in_a_private_temp_folder(
    ssh_world: SshWorld,
) -> None:
    sandbox = ssh_world.sandbox()
    sandbox.ssh_dir = ssh_world.home / ("d" * 80) / "ssh"
    folder = Path(sandbox.control_path()).parent
    assert folder == Path(tempfile.gettempdir()) / f"habakkuk-ssh-{os.getuid()}"
    assert folder.stat().st_mode & 0o777 == 0o700


async def test_the_first_host_key_is_accepted_and_a_changed_one_refused_with_both_fingerprints(
    tmp_path: Path,
) -> None:
    (tmp_path / "server").mkdir()
    server = Sshd(tmp_path / "server")
    server.start()
    try:
        world = SshWorld(tmp_path / "world", server)
        first = world.sandbox()
        await run_command("true", world.workspace, timeout=30, sandbox=first)
        known = world.home / "ssh" / "known_hosts"
        old = server.host_fingerprint
        assert known_fingerprints(known, "127.0.0.1", server.port) == [old]
        await first.close()
        server.new_host_key()
        marker = world.workspace / "ran-here"
        with pytest.raises(SandboxError) as refused:
            await run_command(
                f"touch {marker}", world.workspace, timeout=30, sandbox=world.sandbox()
            )
        message = str(refused.value)
        assert "host key changed" in message
        assert old in message and server.host_fingerprint in message
        assert not marker.exists()  # never run here instead
        assert known_fingerprints(known, "127.0.0.1", server.port) == [old]  # not replaced
    finally:
        server.stop()


async def test_an_unset_key_variable_fails_the_command_and_never_runs_it_here(
    ssh_world: SshWorld,
) -> None:
    del ssh_world.env[KEY_VARIABLE]
    marker = ssh_world.workspace / "ran-here"
    with pytest.raises(SandboxError, match=f"{KEY_VARIABLE} is not set"):
        await run_command(
            f"touch {marker}", ssh_world.workspace, timeout=30, sandbox=ssh_world.sandbox()
        )
    assert not marker.exists()


async def test_a_key_given_inline_is_written_under_the_home_with_mode_0600(
    ssh_world: SshWorld,
) -> None:
    ssh_world.env[KEY_VARIABLE] = ssh_world.server.client_key.read_text()
    sandbox = ssh_world.sandbox("inline")
    result = await run_command("echo in", ssh_world.workspace, timeout=30, sandbox=sandbox)
    assert result.output == "in\n"
    key = ssh_world.home / "ssh" / "inline.key"
    assert key.read_text() == ssh_world.server.client_key.read_text()
    assert key.stat().st_mode & 0o777 == 0o600


async def test_an_unreachable_host_fails_with_the_reason(ssh_world: SshWorld) -> None:
    ssh_world.server = Sshd.__new__(Sshd)  # a port where nothing listens
    ssh_world.server.port = 1
    ssh_world.server.user = "nobody"
    with pytest.raises(SandboxError, match=r"ssh to nobody@127\.0\.0\.1:1 failed"):
        await run_command("true", ssh_world.workspace, timeout=30, sandbox=ssh_world.sandbox())


async def test_a_timeout_kills_the_whole_remote_tree(ssh_world: SshWorld) -> None:
    marker = sleep_marker()
    result = await run_command(
        f"sleep {marker} & sleep {marker}",
        ssh_world.workspace,
        timeout=1,
        sandbox=ssh_world.sandbox(),
    )
    assert result.timed_out
    await eventually(lambda: not running_with(marker), what="the remote tree to end")


async def test_a_foreground_command_ends_what_it_left_in_the_background(
    ssh_world: SshWorld,
) -> None:
    marker = sleep_marker()
    result = await run_command(
        f"sleep {marker} & echo done", ssh_world.workspace, timeout=30, sandbox=ssh_world.sandbox()
    )
    assert (result.exit_code, result.output, result.timed_out) == (0, "done\n", False)
    await eventually(lambda: not running_with(marker), what="the leftover to end")


async def test_cancelling_a_command_kills_the_remote_tree(ssh_world: SshWorld) -> None:
    marker = sleep_marker()
    running = asyncio.create_task(
        run_command(
            f"sleep {marker}", ssh_world.workspace, timeout=600, sandbox=ssh_world.sandbox()
        )
    )
    await eventually(lambda: sleeping(marker), what="the remote command")
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    await eventually(lambda: not running_with(marker), what="the remote command to end")


async def test_a_background_process_logs_reads_input_and_process_kill_ends_its_remote_tree(
    ssh_world: SshWorld, tmp_path: Path
) -> None:
    marker = sleep_marker()
    manager = ProcessManager(tmp_path / "procs", sandboxes=One(ssh_world.sandbox()))
    try:
        info = await manager.start(
            agent="a",
            session="s",
            command=f"echo started in $(pwd); read line; echo got:$line; sleep {marker}",
            cwd=ssh_world.workspace,
        )

        async def said(text: str) -> bool:
            return text in (await manager.output("a", info.id)).text

        await eventually(lambda: said(f"started in {ssh_world.workdir}"), what="its first line")
        await manager.write("a", info.id, "hello\n")
        await eventually(lambda: said("got:hello"), what="the echo of its input")
        await eventually(lambda: running_with(marker), what="the remote sleep")
        killed = await manager.kill("a", info.id)
        assert killed.killed and not killed.running
        await eventually(lambda: not running_with(marker), what="the remote tree to end")
    finally:
        await manager.shutdown()


async def test_a_background_timeout_ends_the_remote_tree(
    ssh_world: SshWorld, tmp_path: Path
) -> None:
    marker = sleep_marker()
    manager = ProcessManager(tmp_path / "procs", sandboxes=One(ssh_world.sandbox()))
    try:
        info = await manager.start(
            agent="a",
            session="s",
            command=f"sleep {marker} & sleep {marker}",
            cwd=ssh_world.workspace,
            timeout_seconds=1,
        )
        done = await manager.wait("a", info.id, timeout_seconds=30)
        assert done.timed_out and not done.running
        await eventually(lambda: not running_with(marker), what="the remote tree to end")
    finally:
        await manager.shutdown()


async def test_shutdown_ends_every_remote_process(ssh_world: SshWorld, tmp_path: Path) -> None:
    marker = sleep_marker()
    manager = ProcessManager(tmp_path / "procs", sandboxes=One(ssh_world.sandbox()))
    for _ in range(2):
        await manager.start(
            agent="a", session="s", command=f"sleep {marker}", cwd=ssh_world.workspace
        )
    await eventually(lambda: len(sleeping(marker)) == 2, what="both remote sleeps")
    await manager.shutdown()
    await eventually(lambda: not running_with(marker), what="the remote processes to end")
