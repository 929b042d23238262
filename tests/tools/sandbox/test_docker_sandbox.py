"""The docker sandbox through a fake docker CLI on PATH (tests/tools/sandbox/fake_docker.py)
that records its argument lists and runs `docker exec`'s command here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from habakkuk.engine.sandbox_config import DockerConfig
from habakkuk.tools.processes import ProcessManager
from habakkuk.tools.sandbox.base import SandboxError
from habakkuk.tools.sandbox.docker import LABEL
from habakkuk.tools.shell import run_command
from tests.helpers import eventually
from tests.tools.sandbox.conftest import (
    FakeDocker,
    docker_sandbox,
    running_with,
    sleep_marker,
)
from tests.tools.sandbox.crash_child import One


def option(argv: list[str], name: str) -> str | None:
    """The value after `name` in an argument list (None when absent)."""
    return argv[argv.index(name) + 1] if name in argv else None


async def test_the_first_command_creates_the_container_with_the_agents_settings(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    workspace = tmp_path / "ws"
    settings = DockerConfig(image="debian:stable-slim", network=False, cpus=1.5, memory="512m")
    sandbox = docker_sandbox(workspace, settings, agent="boxed")
    result = await run_command("echo hi from $(pwd)", workspace, timeout=30, sandbox=sandbox)
    assert (result.exit_code, result.output) == (0, f"hi from {workspace}\n")
    [run] = fake_docker.calls("run")
    assert (
        run[:4] == ["run", "-d", "--init", "--name"] and option(run, "--name") == "habakkuk-boxed"
    )
    assert option(run, "-v") == f"{workspace}:{workspace}"
    assert option(run, "--network") == "none"
    assert option(run, "--cpus") == "1.5"
    assert option(run, "--memory") == "512m"
    assert option(run, "--user") == f"{os.getuid()}:{os.getgid()}"
    assert f"{LABEL}={sandbox.settings_hash()}" in run
    assert run[-3:] == ["debian:stable-slim", "sleep", "infinity"]
    [exec_call] = fake_docker.calls("exec")
    assert exec_call[:5] == ["exec", "habakkuk-boxed", "sh", "-c", exec_call[4]]
    assert "setsid" in exec_call[4]  # under the wrapper that records the process group


async def test_the_container_is_reused_and_made_again_when_its_settings_change(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    workspace = tmp_path / "ws"
    first = docker_sandbox(workspace)
    await run_command("true", workspace, timeout=30, sandbox=first)
    await run_command("true", workspace, timeout=30, sandbox=first)
    assert len(fake_docker.calls("run")) == 1
    assert len(fake_docker.calls("inspect")) == 1  # seen running: trusted for a while
    # The next Habakkuk with the same settings takes the running container.
    await run_command("true", workspace, timeout=30, sandbox=docker_sandbox(workspace))
    assert len(fake_docker.calls("run")) == 1
    assert fake_docker.calls("rm") == []
    # Another memory limit: the old container goes, a new one comes with the new label.
    changed = docker_sandbox(workspace, DockerConfig(memory="1g"))
    await run_command("true", workspace, timeout=30, sandbox=changed)
    assert fake_docker.calls("rm") == [["rm", "-f", "habakkuk-boxed"]]
    assert len(fake_docker.calls("run")) == 2
    assert fake_docker.containers()["habakkuk-boxed"]["label"] == changed.settings_hash()
    assert changed.settings_hash() != first.settings_hash()


async def test_a_stopped_container_is_started_again(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    workspace = tmp_path / "ws"
    await run_command("true", workspace, timeout=30, sandbox=docker_sandbox(workspace))
    (fake_docker.state / "containers.json").write_text(
        (fake_docker.state / "containers.json").read_text().replace("true", "false")
    )
    result = await run_command("echo up", workspace, timeout=30, sandbox=docker_sandbox(workspace))
    assert result.output == "up\n"
    assert fake_docker.calls("start") == [["start", "habakkuk-boxed"]]
    assert len(fake_docker.calls("run")) == 1


async def test_user_image_keeps_the_images_user_and_network_stays_on_by_default(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    workspace = tmp_path / "ws"
    sandbox = docker_sandbox(workspace, DockerConfig(user="image"))
    await run_command("true", workspace, timeout=30, sandbox=sandbox)
    [run] = fake_docker.calls("run")
    assert "--user" not in run and "--network" not in run
    assert "--cpus" not in run and "--memory" not in run


async def test_a_timeout_kills_the_tree_inside_the_container(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    workspace = tmp_path / "ws"
    marker = sleep_marker()
    sandbox = docker_sandbox(workspace)
    result = await run_command(
        f"sleep {marker} & sleep {marker}", workspace, timeout=1, sandbox=sandbox
    )
    assert result.timed_out
    await eventually(lambda: not running_with(marker), what="the container's tree to end")
    kills = [c for c in fake_docker.calls("exec") if c[2:4] == ["bash", "-c"]]
    assert kills and kills[0][-1] == "KILL"


async def test_a_background_process_in_the_container_logs_and_is_killed_whole(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    workspace = tmp_path / "ws"
    marker = sleep_marker()
    manager = ProcessManager(tmp_path / "procs", sandboxes=One(docker_sandbox(workspace)))
    try:
        info = await manager.start(
            agent="boxed",
            session="s",
            command=f"read line; echo got:$line; sleep {marker} & sleep {marker}",
            cwd=workspace,
        )
        await manager.write("boxed", info.id, "hello\n")

        async def said() -> bool:
            return "got:hello" in (await manager.output("boxed", info.id)).text

        await eventually(said, what="its output")
        [started] = [c for c in fake_docker.calls("exec") if c[1] == "-i"]
        assert started[-1] == "keep"  # leftovers of a background command go on
        await eventually(lambda: running_with(marker), what="its sleeps")
        await manager.kill("boxed", info.id)
        await eventually(lambda: not running_with(marker), what="its tree to end")
        signals = [c[-1] for c in fake_docker.calls("exec") if c[2:4] == ["bash", "-c"]]
        assert signals[0] == "TERM"
    finally:
        await manager.shutdown()


async def test_without_docker_on_path_the_command_fails_and_never_runs_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    sandbox = docker_sandbox(workspace)
    marker = workspace / "ran-here"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SandboxError, match="docker is not on PATH"):
        await run_command(f"touch {marker}", workspace, timeout=30, sandbox=sandbox)
    assert not marker.exists()


def real_docker_with(image: str) -> bool:
    """Whether a docker daemon answers here and has `image` already (no pulls in tests)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        found = subprocess.run(
            [docker, "image", "inspect", image], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


@pytest.mark.skipif(
    not real_docker_with("debian:stable-slim"),
    reason="no docker daemon with debian:stable-slim on this machine",
)
async def test_a_real_daemon_runs_the_command_in_a_container_with_no_network(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    sandbox = docker_sandbox(workspace, DockerConfig(network=False), agent=f"t{os.getpid()}")
    try:
        result = await run_command(
            "ls /sys/class/net; touch made-inside; tr '\\0' ' ' < /proc/1/cmdline",
            workspace,
            timeout=120,
            sandbox=sandbox,
        )
        assert result.exit_code == 0, result.output
        assert result.output.split()[0] == "lo" and "init" in result.output
        made = workspace / "made-inside"
        assert made.exists() and made.stat().st_uid == os.getuid()
    finally:
        subprocess.run(["docker", "rm", "-f", sandbox.name], capture_output=True, check=False)


async def test_process_kill_reaches_what_an_exited_background_command_left_running(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    workspace = tmp_path / "ws"
    marker = sleep_marker()
    manager = ProcessManager(tmp_path / "procs", sandboxes=One(docker_sandbox(workspace)))
    try:
        info = await manager.start(
            agent="boxed", session="s", command=f"sleep {marker} & echo left", cwd=workspace
        )
        ended = await manager.wait("boxed", info.id, timeout_seconds=60)
        assert not ended.running and ended.exit_code == 0
        assert running_with(marker), "the leftover is gone already: nothing to test"
        await manager.kill("boxed", info.id)
        await eventually(lambda: not running_with(marker), what="the leftover to end")
    finally:
        await manager.shutdown()
