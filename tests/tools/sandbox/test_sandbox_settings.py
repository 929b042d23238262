"""The agent settings sandbox:, docker: and ssh: (strict: mistakes name file, line and key),
the sandbox each agent gets from them, and what an ssh agent may not do here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.tools.files import WriteFile
from habakkuk.tools.patch_tool import ApplyPatch
from habakkuk.tools.process_tools import BackgroundExec
from habakkuk.tools.processes import ProcessManager
from habakkuk.tools.sandbox import HomeSandboxes
from habakkuk.tools.sandbox.docker import DockerSandbox
from habakkuk.tools.sandbox.local import LocalSandbox
from habakkuk.tools.sandbox.ssh import SshSandbox
from tests.helpers import tool_context
from tests.tools.sandbox.conftest import FakeDocker


def config_with(tmp_path: Path, agent_lines: str) -> Config:
    """A config whose agent `main` has these lines (indented under it) too."""
    return parse_config(CONFIG + agent_lines, tmp_path / "config.yaml", Home(tmp_path))


CONFIG = (
    "providers:\n  mock:\n    type: mock\n"
    "agents:\n  main:\n    model: mock/scripted\n    mode: full\n"
)


def test_the_sandbox_settings_are_read_with_their_defaults(tmp_path: Path) -> None:
    config = config_with(
        tmp_path,
        "    sandbox: docker\n    docker:\n      network: false\n      memory: 2g\n      cpus: 2\n",
    )
    agent = config.agents["main"]
    assert agent.sandbox == "docker"
    assert (agent.docker.network, agent.docker.memory, agent.docker.cpus) == (False, "2g", 2)
    assert agent.docker.image == "debian:stable-slim" and agent.docker.user is None
    plain = config_with(tmp_path, "")
    assert plain.agents["main"].sandbox == "none" and plain.agents["main"].ssh is None


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ("    sandbox: ssh\n", "config.yaml:8: agents.main.ssh: is required with sandbox: ssh"),
        ("    sandbox: podman\n", "agents.main.sandbox"),
        ("    docker:\n      volumes: [/]\n", "agents.main.docker.volumes: unknown key"),
        ("    docker:\n      memory: lots\n", "config.yaml:9: agents.main.docker.memory:"),
        ("    docker:\n      cpus: 0\n", "agents.main.docker.cpus: 0"),
        ("    ssh:\n      host: h\n", "agents.main.ssh.workdir: is required"),
        (
            "    ssh:\n      host: h\n      workdir: work\n",
            "config.yaml:10: agents.main.ssh.workdir",
        ),
        ("    ssh:\n      host: -oProxyCommand=x\n      workdir: /w\n", "agents.main.ssh.host"),
        ("    ssh:\n      host: h\n      workdir: /w\n      port: 0\n", "agents.main.ssh.port"),
        ("    ssh:\n      host: h\n      workdir: /w\n      key_env: a-b\n", "ssh.key_env"),
    ],
)
def test_a_mistake_in_the_sandbox_settings_names_file_line_and_key(
    tmp_path: Path, lines: str, said: str
) -> None:
    with pytest.raises(ConfigError) as error:
        config_with(tmp_path, lines)
    assert said in str(error.value)


def test_each_agent_gets_the_sandbox_its_settings_name(tmp_path: Path) -> None:
    config = config_with(
        tmp_path,
        "    sandbox: docker\n"
        "  far:\n    model: mock/scripted\n    sandbox: ssh\n"
        "    ssh:\n      host: build.example\n      workdir: /srv/work\n"
        "  here:\n    model: mock/scripted\n",
    )
    sandboxes = HomeSandboxes(config, tmp_path)
    assert isinstance(sandboxes.for_agent("main"), DockerSandbox)
    far = sandboxes.for_agent("far")
    assert isinstance(far, SshSandbox) and not far.shares_workspace
    assert isinstance(sandboxes.for_agent("here"), LocalSandbox)
    assert sandboxes.for_agent("main") is sandboxes.for_agent("main")


@pytest.mark.parametrize("tool", [WriteFile(), ApplyPatch()], ids=lambda t: t.name)
async def test_file_writes_are_refused_for_an_agent_whose_commands_run_over_ssh(
    tmp_path: Path, tool: WriteFile | ApplyPatch
) -> None:
    registry = ToolRegistry()
    registry.register(tool, "core")
    ctx = tool_context(tmp_path, files_here=False)
    args = (
        {"path": "note.txt", "content": "x"}
        if tool.name == "write_file"
        else {"patch": "*** Begin Patch\n*** Add File: note.txt\n+x\n*** End Patch\n"}
    )
    use = ToolUseBlock(tool_use_id="t1", tool=tool.name, input=args)
    result = await registry.call(use, ctx, {tool.name})
    assert result.is_error
    assert "sandbox: ssh" in result.text
    assert not (ctx.workspace / "note.txt").exists()


async def test_the_exec_tool_runs_in_the_agents_sandbox(
    tmp_path: Path, fake_docker: FakeDocker
) -> None:
    config = config_with(tmp_path, "    sandbox: docker\n")
    agent = config.agents["main"]
    agent.workspace_path = tmp_path / "ws"
    agent.workspace_path.mkdir()
    manager = ProcessManager(tmp_path / "procs", sandboxes=HomeSandboxes(config, tmp_path))
    exec_tool = BackgroundExec(manager, None)
    ctx = tool_context(tmp_path, workspace=agent.workspace_path)
    output = await exec_tool.run({"command": "echo in the box"}, ctx)
    assert output.text == "exit code 0\nin the box"
    assert fake_docker.calls("exec")[0][1] == "habakkuk-main"
    assert os.path.exists(fake_docker.state / "containers.json")
