"""`habakkuk doctor`: one line per check of config, keys, databases and tools."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from dataclasses import dataclass
from typing import Literal

from habakkuk.engine.config import Config, load_config
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Environment, Home, bad_env_lines
from habakkuk.engine.presets import key_optional

Status = Literal["ok", "WARN", "FAIL"]


@dataclass
class Check:
    status: Status
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.name}: {self.detail}"


async def run_checks(home: Home) -> list[Check]:
    """Every check, in order; a failed config stops the checks that need it."""
    checks: list[Check] = []
    try:
        config = load_config(home)
    except HabakkukError as exc:
        checks.append(Check("FAIL", "config", str(exc)))
        return checks
    checks.append(
        Check(
            "ok",
            "config",
            f"{config.path} ({len(config.providers)} providers, {len(config.agents)} agents)",
        )
    )
    checks += _env_checks(home)
    env = Environment(home.env_path)
    checks += await asyncio.to_thread(_key_checks, config, env)
    checks += _mcp_checks(config, env, home)
    checks += await _database_checks(home)
    checks += _workspace_checks(config)
    for tool, why in (("git", "checkpoints"), ("rg", "fast search_files")):
        found = shutil.which(tool)
        checks.append(
            Check("ok", tool, found) if found else Check("WARN", tool, f"not on PATH ({why})")
        )
    return checks


def _env_checks(home: Home) -> list[Check]:
    path = home.env_path
    if not path.exists():
        return []
    checks = []
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        checks.append(Check("FAIL", ".env", f"{path} is mode {mode:o}; run chmod 600 {path}"))
    bad = bad_env_lines(path)
    if bad:
        checks.append(Check("WARN", ".env", f"{path}: lines {bad} are not KEY=VALUE; ignored"))
    if not checks:
        checks.append(Check("ok", ".env", str(path)))
    return checks


def _key_checks(config: Config, env: Environment) -> list[Check]:
    """Keys by variable name: the environment, .env, then the OS keyring (blocking)."""
    from habakkuk.engine.llm.keys import keyring_get

    checks = []
    for name, provider in config.providers.items():
        variables = provider.key_vars
        if not variables:
            if key_optional(provider):
                checks.append(Check("ok", f"key {name}", "none needed"))
            else:
                checks.append(Check("FAIL", f"key {name}", "no key_env set"))
            continue
        present = [v for v in variables if env.get(v)]
        in_keyring = [] if present else [v for v in variables if keyring_get(v)]
        if present:
            checks.append(Check("ok", f"key {name}", f"{', '.join(present)} set"))
        elif in_keyring:
            checks.append(Check("ok", f"key {name}", f"{', '.join(in_keyring)} in the OS keyring"))
        elif key_optional(provider):
            checks.append(Check("ok", f"key {name}", f"{variables[0]} not set (optional)"))
        else:
            checks.append(Check("FAIL", f"key {name}", f"{' or '.join(variables)} is not set"))
    return checks


def _mcp_checks(config: Config, env: Environment, home: Home) -> list[Check]:
    if not config.mcp_servers:
        return []
    from habakkuk.protocols.mcp.checks import mcp_findings

    status_of: dict[str, Status] = {"OK": "ok", "WARN": "WARN", "FAIL": "FAIL"}
    return [
        Check(status_of.get(f.status, "WARN"), f"mcp {f.server}", f.message)
        for f in mcp_findings(config, env, home)
    ]


async def _database_checks(home: Home) -> list[Check]:
    from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
    from habakkuk.engine.sessions import TranscriptStore
    from habakkuk.engine.store import Database

    checks = []
    home.prepare()
    try:
        control = await Database.open(home.db_path("control"), JOB_MIGRATIONS)
        checks.append(await _integrity(control))
        await control.close()
        transcripts = await TranscriptStore.open(
            home.db_path("transcripts"), home.db_path("control")
        )
        checks.append(await _integrity(transcripts.db))
        await transcripts.close()
    except HabakkukError as exc:
        checks.append(Check("FAIL", "database", str(exc)))
    return checks


async def _integrity(db: object) -> Check:
    from habakkuk.engine.store import Database

    assert isinstance(db, Database)
    row = await db.fetchone("PRAGMA quick_check")
    result = row[0] if row else "no answer"
    name = f"database {db.path.name}"
    return Check("ok", name, "intact") if result == "ok" else Check("FAIL", name, str(result))


def _workspace_checks(config: Config) -> list[Check]:
    checks = []
    for name, agent in config.agents.items():
        path = agent.workspace_path
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            checks.append(Check("FAIL", f"workspace {name}", f"{path}: {exc.strerror}"))
            continue
        if os.access(path, os.W_OK):
            checks.append(Check("ok", f"workspace {name}", f"{path} ({agent.mode} mode)"))
        else:
            checks.append(Check("FAIL", f"workspace {name}", f"{path} is not writable"))
    return checks
