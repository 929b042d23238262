"""Each agent's sandbox, built from its settings on first use and kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from habakkuk.engine.config import Config

from .base import Sandbox
from .docker import DockerSandbox
from .local import LocalSandbox
from .ssh import SshSandbox


class HomeSandboxes:
    """The sandboxes of one home's agents (the `Sandboxes` exec and processes use)."""

    def __init__(
        self, config: Config, home: Path, env: Callable[[str], str | None] | None = None
    ) -> None:
        """`env` looks up ssh key variables (the process environment over the home's .env)."""
        self.config = config
        self.ssh_dir = home / "ssh"
        self.env = env or (lambda name: None)
        self._local = LocalSandbox()
        self._built: dict[str, Sandbox] = {}

    def for_agent(self, agent: str) -> Sandbox:
        """The sandbox `agent`'s commands run in (here for an agent not configured)."""
        found = self._built.get(agent)
        if found is not None:
            return found
        settings = self.config.agents.get(agent)
        sandbox: Sandbox = self._local
        if settings is not None and settings.sandbox == "docker":
            sandbox = DockerSandbox(agent, settings.docker, settings.workspace_path)
        elif settings is not None and settings.sandbox == "ssh" and settings.ssh is not None:
            sandbox = SshSandbox(
                agent, settings.ssh, settings.workspace_path, self.ssh_dir, self.env
            )
        self._built[agent] = sandbox
        return sandbox


class LocalOnly:
    """Every agent's commands here (tests and callers without a config)."""

    def __init__(self) -> None:
        self._local = LocalSandbox()

    def for_agent(self, agent: str) -> Sandbox:
        """The local sandbox, whoever asks."""
        return self._local
