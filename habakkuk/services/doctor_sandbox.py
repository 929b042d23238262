"""The doctor's checks of the agents' sandboxes: docker or ssh on PATH, the ssh key's
variable set, and the host key known for each ssh host (the first one seen is accepted:
the doctor shows which, so the user can compare it with the host's own)."""

from __future__ import annotations

import shutil

from habakkuk.engine.config import Config
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.i18n import t
from habakkuk.tools.sandbox.docker import container_name
from habakkuk.tools.sandbox.ssh import known_fingerprints

from .doctor_ops import Found


def sandbox_checks(config: Config, home: Home, env: Environment) -> list[Found]:
    """One check per agent whose commands run in a sandbox (blocking: runs ssh-keygen)."""
    checks: list[Found] = []
    for name, agent in config.agents.items():
        check = f"sandbox {name}"
        if agent.sandbox == "docker":
            if shutil.which("docker") is None:
                checks.append(("FAIL", check, t("sandbox.doctor_no_docker")))
                continue
            network = "on" if agent.docker.network else "none"
            detail = t(
                "sandbox.doctor_docker",
                container=container_name(name),
                image=agent.docker.image,
                network=network,
            )
            checks.append(("ok", check, detail))
        elif agent.sandbox == "ssh" and agent.ssh is not None:
            ssh = agent.ssh
            where = f"{ssh.user + '@' if ssh.user else ''}{ssh.host}:{ssh.port}"
            if shutil.which("ssh") is None:
                checks.append(("FAIL", check, t("sandbox.doctor_no_ssh")))
                continue
            if ssh.key_env is not None and not env.get(ssh.key_env):
                checks.append(("FAIL", check, t("sandbox.doctor_key_unset", variable=ssh.key_env)))
                continue
            known = known_fingerprints(home.root / "ssh" / "known_hosts", ssh.host, ssh.port)
            if known:
                detail = t("sandbox.doctor_ssh_known", where=where, fingerprints=", ".join(known))
            else:
                detail = t("sandbox.doctor_ssh_new", where=where)
            checks.append(("ok", check, detail))
    return checks
