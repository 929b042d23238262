"""sandbox: docker: one long-lived container per agent, driven through the docker CLI.

The container (habakkuk-<agent>) is created on first use with --init, the workspace
bind-mounted read-write at its own path, --network none when network: false, the cpu and
memory limits and --user (Habakkuk's own uid:gid unless user says otherwise; "image"
keeps the image's). It is labelled with a hash of those settings: a container whose label
differs is removed and created again, one that matches is reused (started if stopped), and
it outlives Habakkuk. Seeing it running is trusted for 30 seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.sandbox_config import DockerConfig
from habakkuk.engine.timeouts import wait_within

from .base import KILLER, WRAPPER, Launch, Sandbox, SandboxError, remote_pid_file

LABEL = "habakkuk.settings"
TRUST_SECONDS = 30.0  # how long a container seen running is not inspected again
_CLI_TIMEOUT = 120.0  # a docker run may pull the image first
_KILL_TIMEOUT = 15.0
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def container_name(agent: str) -> str:
    """habakkuk-<agent>, with what docker refuses in a name replaced."""
    return "habakkuk-" + _UNSAFE.sub("_", agent)


@dataclass(frozen=True)
class CliResult:
    """One docker CLI run: its exit code and what it printed."""

    code: int
    out: str
    err: str


async def run_cli(argv: list[str], timeout: float = _CLI_TIMEOUT) -> CliResult:
    """Run a CLI to completion (bounded); OSError when it cannot start."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await wait_within(process.communicate(), timeout)
    except BaseException:
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    code = process.returncode if process.returncode is not None else -1
    return CliResult(code, out.decode(errors="replace"), err.decode(errors="replace"))


class DockerSandbox(Sandbox):
    """The agent's commands in its container (docker exec under the wrapper)."""

    kind = "docker"

    def __init__(self, agent: str, settings: DockerConfig, workspace: Path) -> None:
        self.agent = agent
        self.settings = settings
        self.workspace = workspace
        self.name = container_name(agent)
        self._seen_at: float | None = None  # monotonic time it was last seen running
        self._lock = asyncio.Lock()

    def user(self) -> str | None:
        """The --user value: None keeps the image's user."""
        if self.settings.user == "image":
            return None
        if self.settings.user is not None:
            return self.settings.user
        return f"{os.getuid()}:{os.getgid()}"

    def settings_hash(self) -> str:
        """What the container was made with: a change means a new container."""
        settings = {
            "image": self.settings.image,
            "network": self.settings.network,
            "cpus": self.settings.cpus,
            "memory": self.settings.memory,
            "user": self.user(),
            "workspace": str(self.workspace),
        }
        text = json.dumps(settings, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def run_argv(self, docker: str) -> list[str]:
        """The docker run that creates the container."""
        argv = [docker, "run", "-d", "--init", "--name", self.name]
        argv += [
            "--label",
            f"{LABEL}={self.settings_hash()}",
            "--label",
            f"habakkuk.agent={self.agent}",
        ]
        argv += ["-v", f"{self.workspace}:{self.workspace}", "-w", str(self.workspace)]
        if not self.settings.network:
            argv += ["--network", "none"]
        if self.settings.cpus is not None:
            argv += ["--cpus", f"{self.settings.cpus:g}"]
        if self.settings.memory is not None:
            argv += ["--memory", self.settings.memory]
        user = self.user()
        if user is not None:
            argv += ["--user", user]
        # A process that never ends keeps the container up between commands.
        return [*argv, self.settings.image, "sleep", "infinity"]

    def _docker(self) -> str:
        docker = shutil.which("docker")
        if docker is None:
            raise SandboxError(
                f"agent {self.agent} runs its commands in docker, but docker is not on PATH"
            )
        return docker

    async def ensure(self) -> str:
        """The container, running and made with the current settings; the docker path."""
        docker = self._docker()
        if self._seen_at is not None and time.monotonic() - self._seen_at < TRUST_SECONDS:
            return docker
        async with self._lock:
            if self._seen_at is not None and time.monotonic() - self._seen_at < TRUST_SECONDS:
                return docker
            await self._converge(docker)
            self._seen_at = time.monotonic()
        return docker

    async def _converge(self, docker: str) -> None:
        want = self.settings_hash()
        template = '{{.State.Running}} {{index .Config.Labels "' + LABEL + '"}}'
        found = await self._cli([docker, "inspect", "-f", template, self.name], check=False)
        if found.code == 0:
            running, _, label = found.out.strip().partition(" ")
            if label == want:
                if running != "true":
                    await self._cli([docker, "start", self.name])
                return
            await self._cli([docker, "rm", "-f", self.name])  # made with other settings
        created = await self._cli(self.run_argv(docker), check=False)
        if created.code != 0:
            # Another Habakkuk process may have made it in the meantime: take that one.
            again = await self._cli([docker, "inspect", "-f", template, self.name], check=False)
            if again.code != 0 or again.out.strip() != f"true {want}":
                raise SandboxError(
                    f"cannot create container {self.name}: {_last_line(created.err)}"
                )

    async def _cli(
        self, argv: list[str], *, check: bool = True, timeout: float = _CLI_TIMEOUT
    ) -> CliResult:
        try:
            result = await run_cli(argv, timeout)
        except OSError as exc:
            raise SandboxError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        except TimeoutError:
            raise SandboxError(f"docker {argv[1]} did not finish in {timeout:g}s") from None
        if check and result.code != 0:
            raise SandboxError(f"docker {argv[1]} {self.name}: {_last_line(result.err)}")
        return result

    async def launch(self, command: str, cwd: Path, *, token: str, foreground: bool) -> Launch:
        """docker exec [-i] habakkuk-<agent> sh -c WRAPPER ... in `cwd` there."""
        docker = await self.ensure()
        mode = "reap" if foreground else "keep"
        interactive = [] if foreground else ["-i"]  # process_write feeds its stdin
        argv = [docker, "exec", *interactive, self.name, "sh", "-c", WRAPPER, "sh"]
        argv += [remote_pid_file(token), str(cwd), command, mode]
        return Launch(tuple(argv), Path("/"), token)  # the client's own cwd does not matter

    async def kill(self, token: str, signal_name: str = "KILL") -> None:
        """Signal the command's process group inside the container."""
        docker = self._docker()
        argv = [docker, "exec", self.name, "bash", "-c", KILLER, "bash"]
        argv += [remote_pid_file(token), signal_name]
        await self._cli(argv, check=False, timeout=_KILL_TIMEOUT)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no reason given"
