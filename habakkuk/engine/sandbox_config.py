"""An agent's `sandbox:`, `docker:` and `ssh:` settings: where its commands run (spec 000
"Sandboxes"). The sandboxes themselves are habakkuk.tools.sandbox."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol

from .config_schema import line_of
from .errors import ConfigError

SandboxKind = Literal["none", "docker", "ssh"]
DEFAULT_IMAGE = "debian:stable-slim"  # has bash and setsid (util-linux)
_MEMORY = re.compile(r"^[0-9]+(\.[0-9]+)?[bkmgBKMG]?$")  # docker's --memory: 512m, 2g
_HOST = re.compile(r"^[A-Za-z0-9._:%\[\]-]+$")  # a name or an address, never an option
_USER = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class DockerConfig:
    """`agents.NAME.docker`: the agent's long-lived container."""

    image: str = DEFAULT_IMAGE
    network: bool = True  # false: --network none
    cpus: float | None = None  # --cpus
    memory: str | None = None  # --memory, e.g. 2g
    # --user: default Habakkuk's own uid:gid, so files written in the workspace stay
    # the user's; "image" keeps the image's own user.
    user: str | None = None


@dataclass
class SshConfig:
    """`agents.NAME.ssh`: the remote host the agent's commands run on."""

    host: str
    workdir: str  # where the workspace maps on the remote (an absolute path)
    port: int = 22
    user: str | None = None
    # A variable (process environment or the home's .env) holding a private key, or a
    # key's path; unset: ssh uses its agent and config.
    key_env: str | None = None


class AgentSandbox(Protocol):
    """What resolve_sandbox reads of an agent's settings (config.AgentConfig)."""

    @property
    def name(self) -> str: ...
    @property
    def sandbox(self) -> SandboxKind: ...
    @property
    def docker(self) -> DockerConfig: ...
    @property
    def ssh(self) -> SshConfig | None: ...


def resolve_sandbox(agent: AgentSandbox, path: Path) -> None:
    """Check an agent's sandbox settings read from `path`: ssh needs an `ssh:` section with
    a host and an absolute workdir; docker's limits must be ones docker takes."""
    name = agent.name
    if agent.sandbox == "ssh" and agent.ssh is None:
        where = f"{path}:{line_of(agent, 'sandbox')}: agents.{name}.ssh"
        raise ConfigError(f"{where}: is required with sandbox: ssh (host and workdir)")
    docker: DockerConfig = agent.docker

    def fail(section: Any, kind: str, key: str, message: str) -> ConfigError:
        where = f"{path}:{line_of(section, key)}: agents.{name}.{kind}.{key}"
        return ConfigError(f"{where}: {message}")

    if not docker.image.strip() or docker.image.startswith("-"):
        raise fail(docker, "docker", "image", f"{docker.image!r} is not an image name")
    if docker.cpus is not None and docker.cpus <= 0:
        raise fail(docker, "docker", "cpus", f"{docker.cpus} must be more than 0")
    if docker.memory is not None and not _MEMORY.match(docker.memory):
        raise fail(docker, "docker", "memory", f"{docker.memory!r} is not a size (e.g. 512m, 2g)")
    if docker.user is not None and (not docker.user.strip() or docker.user.startswith("-")):
        raise fail(docker, "docker", "user", f"{docker.user!r} is not a user (uid:gid or image)")
    ssh: SshConfig | None = agent.ssh
    if ssh is None:
        return
    if not _HOST.match(ssh.host) or ssh.host.startswith("-"):
        raise fail(ssh, "ssh", "host", f"{ssh.host!r} is not a host name or address")
    if not 0 < ssh.port < 65536:
        raise fail(ssh, "ssh", "port", f"{ssh.port} is not a port (1-65535)")
    if ssh.user is not None and not _USER.match(ssh.user):
        raise fail(ssh, "ssh", "user", f"{ssh.user!r} is not a user name")
    if ssh.key_env is not None and not _ENV_NAME.match(ssh.key_env):
        raise fail(ssh, "ssh", "key_env", f"{ssh.key_env!r} is not a variable name")
    if not PurePosixPath(ssh.workdir).is_absolute():
        raise fail(ssh, "ssh", "workdir", f"{ssh.workdir!r} must be an absolute path")
