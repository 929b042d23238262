"""Fixtures of the sandbox tests: a real sshd on loopback, a fake docker CLI on PATH, and
the process table to count what still runs."""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from habakkuk.engine.sandbox_config import DockerConfig, SshConfig
from habakkuk.tools.sandbox.docker import DockerSandbox
from habakkuk.tools.sandbox.ssh import SshSandbox
from tests.tools.sandbox.sshd import Sshd

KEY_VARIABLE = "HK_TEST_SSH_KEY"


def running_with(marker: str) -> list[int]:
    """The pids of live (not zombie) processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[:1]
        if marker.encode() in cmdline and state != [b"Z"]:
            found.append(int(name))
    return found


def sleeping(marker: str) -> list[int]:
    """The pids of live `sleep <marker>` processes (not the shells or clients naming it)."""
    found = []
    for pid in running_with(marker):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"sleep") and argv[1:2] == [marker.encode()]:
            found.append(pid)
    return found


def sleep_marker() -> str:
    """A sleep duration nothing else on the machine runs: `sleep <it>` is findable."""
    return f"{random.randint(400, 900)}.{random.randint(10**6, 10**7)}"


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """One sshd for the session's tests (each uses its own home and remote folder)."""
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


class SshWorld:
    """A home, a workspace here and a workdir "there", and sandboxes made on them."""

    def __init__(self, root: Path, server: Sshd) -> None:
        self.server = server
        self.home = root / "home"
        self.workspace = root / "workspace"
        self.workdir = root / "remote"
        for folder in (self.home, self.workspace, self.workdir):
            folder.mkdir(parents=True)
        self.env: dict[str, str] = {KEY_VARIABLE: str(server.client_key)}
        self.made: list[SshSandbox] = []

    def sandbox(self, agent: str = "remote", *, key_env: str | None = KEY_VARIABLE) -> SshSandbox:
        """An ssh sandbox of `agent` on the test server."""
        settings = SshConfig(
            host="127.0.0.1",
            workdir=str(self.workdir),
            port=self.server.port,
            user=self.server.user,
            key_env=key_env,
        )
        made = SshSandbox(agent, settings, self.workspace, self.home / "ssh", self.env.get)
        self.made.append(made)
        return made


@pytest.fixture
async def ssh_world(tmp_path: Path, sshd: Sshd) -> AsyncIterator[SshWorld]:
    """A fresh home on the session's sshd; its shared connections closed afterwards."""
    world = SshWorld(tmp_path, sshd)
    yield world
    for sandbox in world.made:
        await sandbox.close()


class FakeDocker:
    """The fake docker CLI on PATH, and what it was asked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.state.mkdir(parents=True)
        self.bin = root / "bin"
        self.bin.mkdir()
        script = Path(__file__).with_name("fake_docker.py")
        docker = self.bin / "docker"
        docker.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
        docker.chmod(0o755)

    def calls(self, command: str | None = None) -> list[list[str]]:
        """Every argument list given, in order (only `command`'s when given)."""
        path = self.state / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        calls = [json.loads(line) for line in lines]
        return [c for c in calls if command is None or c[0] == command]

    def containers(self) -> dict[str, dict[str, object]]:
        """The containers it holds now."""
        path = self.state / "containers.json"
        found: dict[str, dict[str, object]] = json.loads(path.read_text()) if path.exists() else {}
        return found


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDocker:
    """The fake docker first on PATH for this test."""
    fake = FakeDocker(tmp_path / "docker")
    monkeypatch.setenv("PATH", f"{fake.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_DIR", str(fake.state))
    return fake


def docker_sandbox(
    workspace: Path, settings: DockerConfig | None = None, agent: str = "boxed"
) -> DockerSandbox:
    """A docker sandbox of `agent` with these docker: settings (default: the defaults)."""
    workspace.mkdir(parents=True, exist_ok=True)
    return DockerSandbox(agent, settings or DockerConfig(), workspace)
