"""`habakkuk doctor` on sandboxed agents: the host key an ssh agent's host was first seen
with (against the real sshd), a key variable that is unset, docker missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Environment, Home
from habakkuk.services.doctor_sandbox import sandbox_checks
from habakkuk.tools.shell import run_command
from tests.tools.sandbox.conftest import KEY_VARIABLE, SshWorld


def ssh_config_text(world: SshWorld) -> str:
    return (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  far:\n    model: mock/scripted\n    sandbox: ssh\n    ssh:\n"
        f"      host: 127.0.0.1\n      port: {world.server.port}\n"
        f"      user: {world.server.user}\n      workdir: {world.workdir}\n"
        f"      key_env: {KEY_VARIABLE}\n"
    )


async def test_doctor_shows_the_host_key_first_accepted_for_an_ssh_agent(
    ssh_world: SshWorld,
) -> None:
    home = Home(ssh_world.home)
    config = parse_config(ssh_config_text(ssh_world), ssh_world.home / "config.yaml", home)
    env = Environment(overrides=dict(ssh_world.env))
    [before] = sandbox_checks(config, home, env)
    assert before[:2] == ("ok", "sandbox far") and "not seen yet" in before[2]
    await run_command("true", ssh_world.workspace, timeout=30, sandbox=ssh_world.sandbox("far"))
    [after] = sandbox_checks(config, home, env)
    assert after[0] == "ok" and ssh_world.server.host_fingerprint in after[2]
    assert f"127.0.0.1:{ssh_world.server.port}" in after[2]


def test_doctor_fails_an_ssh_agent_whose_key_variable_is_unset(ssh_world: SshWorld) -> None:
    home = Home(ssh_world.home)
    config = parse_config(ssh_config_text(ssh_world), ssh_world.home / "config.yaml", home)
    [check] = sandbox_checks(config, home, Environment(overrides={}))
    assert check[0] == "FAIL" and KEY_VARIABLE in check[2]


def test_doctor_fails_a_docker_agent_without_docker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "providers:\n  mock:\n    type: mock\nagents:\n  boxed:\n    model: mock/scripted\n"
    text += "    sandbox: docker\n"
    home = Home(tmp_path)
    config = parse_config(text, tmp_path / "config.yaml", home)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    [check] = sandbox_checks(config, home, Environment())
    assert check[:2] == ("FAIL", "sandbox boxed") and "docker" in check[2]
