"""A stand-in for a Habakkuk process that runs one command and is then killed with -9:
`python -m tests.tools.sandbox.crash_child SPEC` where SPEC is JSON with the sandbox
("none", "docker" or "ssh" and its settings), the run/commands folder, the command and
whether it runs in the background. It prints "started" once the command runs."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from habakkuk.engine.sandbox_config import DockerConfig, SshConfig
from habakkuk.tools.processes import ProcessManager
from habakkuk.tools.sandbox.base import Sandbox
from habakkuk.tools.sandbox.docker import DockerSandbox
from habakkuk.tools.sandbox.groups import CommandGroups
from habakkuk.tools.sandbox.local import LocalSandbox
from habakkuk.tools.sandbox.ssh import SshSandbox
from habakkuk.tools.shell import run_command


class One:
    """Every agent's commands in the one sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def for_agent(self, agent: str) -> Sandbox:
        return self.sandbox


def sandbox_of(spec: dict[str, str]) -> Sandbox:
    """The sandbox SPEC names (what the next start builds again from the same settings)."""
    workspace = Path(spec["workspace"])
    if spec["kind"] == "docker":
        return DockerSandbox("boxed", DockerConfig(), workspace)
    if spec["kind"] == "ssh":
        settings = SshConfig(
            host="127.0.0.1",
            workdir=spec["workdir"],
            port=int(spec["port"]),
            user=spec["user"],
            key_env="KEY",
        )
        key = spec["key"]
        return SshSandbox("remote", settings, workspace, Path(spec["ssh_dir"]), {"KEY": key}.get)
    return LocalSandbox()


async def main(spec: dict[str, str]) -> None:
    sandbox = sandbox_of(spec)
    groups = CommandGroups(Path(spec["groups"]))
    workspace = Path(spec["workspace"])
    if spec.get("background"):
        manager = ProcessManager(Path(spec["procs"]), sandboxes=One(sandbox), groups=groups)
        await manager.start(agent="a", session="s", command=spec["command"], cwd=workspace)
        print("started", flush=True)
        await asyncio.Event().wait()  # until killed
    print("started", flush=True)
    await run_command(spec["command"], workspace, timeout=600, sandbox=sandbox, groups=groups)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
