"""The doctor's checks: one per check of config, keys, databases and tools.

`habakkuk doctor` (habakkuk.cli) prints them; the dashboard's config view (GET /api/config)
reads them through the control room (services.overview.ControlRoom.doctor), which the
server reaches through its host's Protocol.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from habakkuk.engine.config import Config, load_config
from habakkuk.engine.errors import ConfigError, HabakkukError
from habakkuk.engine.home import Environment, Home, bad_env_lines
from habakkuk.engine.i18n import t
from habakkuk.engine.presets import key_optional
from habakkuk.engine.store import SqliteDatabase

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
    counts = t("cli.doctor.providers", count=len(config.providers))
    counts += ", " + t("cli.doctor.agents", count=len(config.agents))
    checks.append(Check("ok", "config", f"{config.path} ({counts})"))
    if not config.agents:
        try:
            config.agent(None)
        except HabakkukError as exc:
            checks.append(Check("FAIL", "agents", str(exc)))
    try:
        checks += _env_checks(home)
        from habakkuk.engine.secrets import home_environment

        env = home_environment(home, config)  # keys kept in a secret manager: secrets.refs
    except ConfigError as exc:  # a .env that is not UTF-8: every start would stop here
        checks.append(Check("FAIL", ".env", str(exc)))
        return checks
    checks += _extra_checks(config)
    checks += _plugin_checks(config)
    checks += _plugin_program_checks(home)
    from .doctor_ops import secret_checks, telemetry_checks  # secrets:, telemetry:

    ops = await asyncio.to_thread(secret_checks, env)
    checks += [Check(*one) for one in ops + telemetry_checks(config)]
    from .doctor_browser import browser_checks  # browser: which one, --no-sandbox as root

    checks += [Check(*one) for one in browser_checks(config)]
    checks += await asyncio.to_thread(_key_checks, config, env)
    checks += await asyncio.to_thread(_login_checks, config, home)
    checks += await asyncio.to_thread(_search_checks, config, env)
    checks += _channel_checks(config, env)
    checks += _generation_checks(config, env)
    checks += _tts_checks(config, env)
    checks += _transcription_checks(config, env)
    from .doctor_computer import computer_checks  # the desktops' programs

    checks += [Check(*one) for one in computer_checks(config)]
    checks += await _mcp_checks(config, env, home)
    from .doctor_ha import homeassistant_checks  # homeassistant: the token, the instance

    checks += [Check(*one) for one in await homeassistant_checks(config, env)]
    from .doctor_nodes import nodes_checks  # nodes: how many devices paired, online

    checks += [Check(*one) for one in await nodes_checks(config, home)]
    checks += await _database_checks(home, config)
    checks += _workspace_checks(config, home)
    from .doctor_sandbox import sandbox_checks  # docker or ssh, and the host keys seen

    checks += [Check(*one) for one in await asyncio.to_thread(sandbox_checks, config, home, env)]
    checks += await _skill_checks(config, home)
    checks += await asyncio.to_thread(_memory_checks, config, home)
    for tool in ("git", "rg"):  # checkpoints; fast search_files (the detail says which)
        found = shutil.which(tool)
        missing = t(f"cli.doctor.{tool}_missing")
        checks.append(Check("ok", tool, found) if found else Check("WARN", tool, missing))
    return checks


# Provider types whose client library is an optional extra: (module, extra).
PROVIDER_EXTRAS = {"litellm": ("litellm", "litellm")}


# Opt-in toolsets whose library is an extra: toolset -> (its module, the extra).
TOOLSET_EXTRAS = {"a2a": ("a2a", "a2a")}


def _extra_checks(config: Config) -> list[Check]:
    """A provider or a toolset whose library is not installed fails at its first call:
    say so now."""
    import importlib.util

    checks = []
    for name, provider in config.providers.items():
        needed = PROVIDER_EXTRAS.get(provider.type or "")
        if needed is None:
            continue
        module, extra = needed
        # find_spec only looks on the path: litellm takes seconds to import.
        if importlib.util.find_spec(module) is None:
            checks.append(
                Check(
                    "FAIL",
                    f"provider {name}",
                    t("cli.doctor.extra_missing", type=provider.type, extra=extra),
                )
            )
        else:
            checks.append(Check("ok", f"provider {name}", t("cli.doctor.installed", module=module)))
    for toolset, (module, extra) in TOOLSET_EXTRAS.items():
        users = sorted(name for name, agent in config.agents.items() if toolset in agent.toolsets)
        if users and importlib.util.find_spec(module) is None:
            said = t("cli.doctor.toolset_extra_missing", toolset=toolset, extra=extra)
            checks.append(Check("FAIL", f"toolset {toolset}", f"{said} ({', '.join(users)})"))
    return checks


def _plugin_checks(config: Config) -> list[Check]:
    """Plugins that failed to load, and plugin commands a built-in command shadows."""
    from habakkuk.conversation.commands import find
    from habakkuk.conversation.plugin_commands import shadowed_commands

    checks = [Check("WARN", "plugins", problem) for problem in config.plugin_problems]
    checks += [Check("WARN", "plugins", line) for line in shadowed_commands(config, find)]
    return checks


def _plugin_program_checks(home: Home) -> list[Check]:
    """An enabled plugin whose programs cannot run (enabled before enabling set their
    executable bit): its commands, hooks and servers would fail with "Permission denied"."""
    from habakkuk.knowledge.plugins.manage import Plugins
    from habakkuk.knowledge.plugins.programs import not_executable

    checks = []
    try:
        states = Plugins(home.root).list()
    except HabakkukError:
        return []  # an unreadable lock file is among the plugin problems already
    for state in states:
        if state.status != "enabled" or state.description is None:
            continue
        missing = not_executable(state.description.folder, state.description.programs)
        if missing:
            checks.append(
                Check(
                    "WARN",
                    "plugins",
                    t(
                        "cli.doctor.not_executable",
                        plugin=state.entry.name,
                        files=", ".join(missing),
                    ),
                )
            )
    return checks


def _channel_checks(config: Config, env: Environment) -> list[Check]:
    """Each channel's secret variables (the `*_env` settings its platform takes: a bot
    token, Slack's two tokens, a mailbox password): without them it never starts."""
    from habakkuk.engine.channel_config import PLATFORM_SETTINGS

    checks = []
    for name, channel in config.channels.items():
        keys = sorted(k for k in PLATFORM_SETTINGS[channel.type].accepted if k.endswith("_env"))
        variables = [str(v) for v in (getattr(channel, key) for key in keys) if v]
        missing = [variable for variable in variables if not env.get(variable)]
        if missing:
            several = "cli.doctor.unset_several" if len(missing) > 1 else "cli.doctor.unset"
            unset = t(several, names=", ".join(missing))
            checks.append(Check("FAIL", f"channel {name}", unset))
        elif variables:
            checks.append(Check("ok", f"channel {name}", _set(variables)))
        else:
            checks.append(Check("ok", f"channel {name}", t("cli.doctor.no_secret")))
    return checks


def _generation_checks(config: Config, env: Environment) -> list[Check]:
    """`images:` and `video:`: the provider's key variable is set (no network call)."""
    checks = []
    for section, configured in (("images", config.images), ("video", config.video)):
        if configured is None:
            continue
        name = f"{section} ({configured.provider})"
        variable = configured.key_env
        if env.get(variable):
            checks.append(Check("ok", name, _set([variable])))
        else:
            checks.append(Check("FAIL", name, _unset(variable)))
    return checks


def _tts_checks(config: Config, env: Environment) -> list[Check]:
    """`tts:`: the key variable set, or espeak-ng installed; ffmpeg for voice notes."""
    tts = config.tts
    if tts is None:
        return []
    name = f"tts ({tts.provider})"
    checks = []
    if tts.provider == "espeak":
        found = shutil.which("espeak-ng") or shutil.which("espeak")
        checks.append(
            Check("ok", name, found)
            if found
            else Check("FAIL", name, t("cli.doctor.espeak_missing"))
        )
    elif tts.key_env:
        if env.get(tts.key_env):
            checks.append(Check("ok", name, _set([tts.key_env])))
        else:
            checks.append(Check("FAIL", name, _unset(tts.key_env)))
    else:
        checks.append(Check("ok", name, t("cli.doctor.no_key_needed")))
    if tts.provider in ("edge", "espeak") and shutil.which("ffmpeg") is None:
        checks.append(Check("WARN", "ffmpeg", t("cli.doctor.ffmpeg_missing")))
    return checks


def _transcription_checks(config: Config, env: Environment) -> list[Check]:
    """`transcription:`: the key variable set, or the local model folder holding a model
    (config loading already refused a folder that does not exist or a missing extra)."""
    settings = config.transcription
    if settings is None:
        return []
    name = f"transcription ({settings.provider})"
    if settings.provider == "local":
        folder = Path(settings.model)
        missing = [part for part in LOCAL_MODEL_FILES if not (folder / part).is_file()]
        if missing:
            return [
                Check(
                    "FAIL",
                    name,
                    t("cli.doctor.not_a_model", folder=folder, files=", ".join(missing)),
                )
            ]
        size = (folder / "model.bin").stat().st_size / 1e6
        return [Check("ok", name, f"{folder} (model.bin {size:.0f} MB)")]
    if settings.key_env and not env.get(settings.key_env):
        return [Check("FAIL", name, _unset(settings.key_env))]
    return [Check("ok", name, settings.base_url)]


# What a CTranslate2 Whisper model folder holds besides its tokenizer (tokenizer.json, or
# the vocabulary file of older conversions).
LOCAL_MODEL_FILES = ("model.bin", "config.json")


def _env_checks(home: Home) -> list[Check]:
    path = home.env_path
    if not path.exists():
        return []
    checks = []
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        checks.append(Check("FAIL", ".env", t("cli.doctor.env_mode", path=path, mode=f"{mode:o}")))
    bad = bad_env_lines(path)
    if bad:
        checks.append(Check("WARN", ".env", t("cli.doctor.env_lines", path=path, lines=bad)))
    if not checks:
        checks.append(Check("ok", ".env", str(path)))
    return checks


def _key_checks(config: Config, env: Environment) -> list[Check]:
    """Keys by variable name: the environment, .env, then the OS keyring (blocking)."""
    from habakkuk.engine.llm.keys import keyring_get

    checks = []
    for name, provider in config.providers.items():
        if provider.auth is not None:
            continue  # a subscription login, not a key: _login_checks
        variables = provider.key_vars
        if provider.type == "bedrock" and not any(env.get(v) for v in variables):
            # No Bedrock API key: the AWS chain and a region must be found, or every call fails
            checks.append(_bedrock_check(name, provider.region, provider.base_url))
            continue
        if not variables:
            if key_optional(provider):
                checks.append(Check("ok", f"key {name}", t("cli.doctor.none_needed")))
            else:
                checks.append(Check("FAIL", f"key {name}", t("cli.doctor.no_key_env")))
            continue
        present = [v for v in variables if env.get(v)]
        in_keyring = [] if present else [v for v in variables if keyring_get(v)]
        if present:
            checks.append(Check("ok", f"key {name}", _set(present)))
        elif in_keyring:
            checks.append(Check("ok", f"key {name}", _in_keyring(in_keyring)))
        elif key_optional(provider):
            optional = t("cli.doctor.optional_unset", name=variables[0])
            checks.append(Check("ok", f"key {name}", optional))
        else:
            either = t("cli.doctor.or").join(variables)
            checks.append(Check("FAIL", f"key {name}", t("cli.doctor.key_unset", names=either)))
    return checks


def _bedrock_check(name: str, region: str | None, base_url: str | None) -> Check:
    """A keyless Bedrock provider: its region and the AWS chain's credentials are found
    (as the adapter finds them; no request is made)."""
    from habakkuk.engine.llm.adapters.bedrock_auth import BedrockAuth, bearer_token
    from habakkuk.engine.llm.provider import ProviderError

    auth = BedrockAuth(name, region, base_url)
    try:
        found = auth.resolve_region()
        if bearer_token(None) is None:
            auth.resolve_credentials()
    except ProviderError as exc:
        return Check("FAIL", f"key {name}", str(exc.args[0]))
    return Check("ok", f"key {name}", f"AWS credentials, region {found}")


def _login_checks(config: Config, home: Home) -> list[Check]:
    """The providers with `auth:`: their login is in auth.json (it is refreshed when used)."""
    from habakkuk.engine.llm.logins.commands import signed_in_as

    checks = []
    for name, provider in config.providers.items():
        if provider.auth is None:
            continue
        try:
            who = signed_in_as(provider.auth, config.auth, home.root)
        except HabakkukError as exc:  # auth.json is not JSON
            checks.append(Check("FAIL", f"login {name}", str(exc)))
            continue
        if who is None:
            missing = t("auth.not_signed_in", kind=provider.auth)
            checks.append(Check("FAIL", f"login {name}", missing))
        else:
            checks.append(Check("ok", f"login {name}", who))
    return checks


def _search_checks(config: Config, env: Environment) -> list[Check]:
    """web_search's provider: its key variable set, as model keys are found (no search is
    made); a provider that takes no key says where it searches."""
    from habakkuk.engine.llm.keys import keyring_get

    search = config.search
    if search is None:
        return [Check("ok", "search", t("cli.doctor.search_default"))]
    name = f"search {search.provider}"
    variable = search.key_var
    if variable is None:
        where = search.url or search.base_url or t("cli.doctor.duckduckgo")
        return [Check("ok", name, t("cli.doctor.no_key_needed_at", where=where))]
    if env.get(variable):
        return [Check("ok", name, _set([variable]))]
    if keyring_get(variable):
        return [Check("ok", name, _in_keyring([variable]))]
    return [Check("FAIL", name, _unset(variable))]


MCP_PROBE_SECONDS = 10.0


async def _mcp_checks(config: Config, env: Environment, home: Home) -> list[Check]:
    """Static findings, then each sound stdio server started and asked to initialize."""
    if not config.mcp_servers:
        return []
    from habakkuk.protocols.mcp.checks import (
        mcp_findings,
        ok_detail,
        probe_server,
        reach_line,
        reaches,
    )

    status_of: dict[str, Status] = {"OK": "ok", "WARN": "WARN", "FAIL": "FAIL"}
    findings = mcp_findings(config, env, home)
    checks = [
        Check(status_of.get(f.status, "WARN"), f"mcp {f.server}", f.message) for f in findings
    ]
    failed = {f.server for f in findings if f.status == "FAIL"}
    # Only stdio servers: starting one is local, while a url server would mean the network.
    names = [
        name
        for name, server in config.mcp_servers.items()
        if server.command is not None and name not in failed
    ]
    answers = await asyncio.gather(
        *(probe_server(config.mcp_servers[n], env, home, MCP_PROBE_SECONDS) for n in names)
    )
    by_name = dict(zip(names, answers, strict=True))
    for check in checks:
        server = check.name.removeprefix("mcp ")
        why = by_name.pop(server, None) if check.status == "ok" else None
        if why is not None:
            check.status, check.detail = "FAIL", t("cli.doctor.mcp_no_start", why=why)
        elif check.status == "ok" and server in names:
            check.detail = t("cli.doctor.mcp_answered")
        if check.status == "ok":
            check.detail = ok_detail(check.detail, config, server)
    for server, why in by_name.items():
        if why is not None:
            checks.append(Check("FAIL", f"mcp {server}", t("cli.doctor.mcp_no_start", why=why)))
    # A server whose tools no agent is offered is up for nothing: say what to add.
    checks += [
        Check("WARN", f"mcp {server}", reach_line(config, server))
        for server in config.mcp_servers
        if not reaches(config, server)
    ]
    return checks


async def _database_checks(home: Home, config: Config) -> list[Check]:
    """Where the databases are; on PostgreSQL the server's checks (services/doctor_pg.py),
    on SQLite each file's integrity."""
    from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
    from habakkuk.engine.sessions import TranscriptStore
    from habakkuk.engine.storage import storage_url

    try:
        url = storage_url(config)
    except ConfigError as exc:
        return [Check("FAIL", "storage", str(exc))]
    if url is not None:
        from habakkuk.engine.storage import pg_driver

        from .doctor_pg import postgres_checks

        try:
            pg_driver(url)  # installed, and it loads (libpq too)
        except ConfigError as exc:
            return [Check("FAIL", "storage", str(exc))]
        found = await asyncio.to_thread(postgres_checks, url)
        return [Check("ok", "storage", "PostgreSQL"), *(Check(*check) for check in found)]
    checks = [Check("ok", "storage", t("cli.doctor.sqlite_files", root=home.root))]
    home.prepare()
    try:
        control = await SqliteDatabase.open(home.db_path("control"), JOB_MIGRATIONS)
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
    from habakkuk.engine.store import SqliteDatabase

    assert isinstance(db, SqliteDatabase)
    row = await db.fetchone("PRAGMA quick_check")
    result = row[0] if row else t("cli.doctor.no_answer")
    name = f"database {db.path.name}"
    if result == "ok":
        return Check("ok", name, t("cli.doctor.intact"))
    return Check("FAIL", name, str(result))


async def _skill_checks(config: Config, home: Home) -> list[Check]:
    """How many skills there are, and a warning for each folder that is not one (with
    its path and why), and for a skills/.lock.json that cannot be read."""
    from habakkuk.knowledge.hub.lock import read_lock
    from habakkuk.knowledge.skills.service import Skills
    from habakkuk.knowledge.skills.types import ScanReport

    def no_saves(files: object) -> ScanReport:  # doctor only reads the skills
        raise HabakkukError("doctor saves no skills")

    skills = Skills(home.root, config, scan=no_saves)
    checks: list[Check] = []
    _, problem = await asyncio.to_thread(read_lock, skills.root)
    if problem:
        checks.append(Check("WARN", "skills", problem))
    seen: set[str] = set()
    warned: dict[str, str] = {}  # a skill read leniently, by where it is
    for agent in config.agents:
        for s in await skills.list_skills(agent):
            key = f"own:{agent}:{s.name}" if s.scope == "own" else f"shared:{s.name}"
            seen.add(key)
            if s.warning:
                where = f"{agent}'s own skill" if s.scope == "own" else "skill"
                warned[key] = f"{where} {s.name}: {s.warning}"
    shared = sum(1 for key in seen if not key.startswith("own:"))
    own = len(seen) - shared
    checks.append(Check("ok", "skills", t("cli.doctor.skills", shared=shared, own=own)))
    checks.extend(Check("WARN", "skills", warned[key]) for key in sorted(warned))
    for folder in await skills.skipped():
        skipped = t("cli.doctor.skipped", path=folder.path, reason=folder.reason)
        checks.append(Check("WARN", "skills", skipped))
    return checks


def _memory_checks(config: Config, home: Home) -> list[Check]:
    """A warning for each note file over the size a note is read up to (stat calls only)."""
    from habakkuk.knowledge.notes import NoteFiles, partial_note

    checks = []
    for agent in config.agents:
        for item in NoteFiles(home.agent_dir(agent) / "memory").oversized():
            checks.append(
                Check(
                    "WARN",
                    f"memory {agent}",
                    t("cli.doctor.split_note", note=partial_note(item.slug, item.size)),
                )
            )
    return checks


def _workspace_checks(config: Config, home: Home) -> list[Check]:
    checks = []
    root = home.root.resolve()
    for name, agent in config.agents.items():
        path = agent.workspace_path
        warned = path == root or path in root.parents
        if warned:
            checks.append(
                Check(
                    "WARN",
                    f"workspace {name}",
                    t("cli.doctor.workspace_home", path=path, root=root),
                )
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            checks.append(Check("FAIL", f"workspace {name}", f"{path}: {exc.strerror}"))
            continue
        if os.access(path, os.W_OK):
            if warned:
                continue
            mode = t("cli.doctor.workspace_mode", path=path, mode=agent.mode)
            checks.append(Check("ok", f"workspace {name}", mode))
        else:
            not_writable = t("cli.doctor.not_writable", path=path)
            checks.append(Check("FAIL", f"workspace {name}", not_writable))
    return checks


def _set(variables: list[str]) -> str:
    """The detail of variables that are set: "TELEGRAM_TOKEN set"."""
    return t("cli.doctor.set", names=", ".join(variables))


def _unset(variable: str) -> str:
    """The detail of a variable that is missing: "... is not set (environment or .env)"."""
    return t("cli.doctor.unset", names=variable)


def _in_keyring(variables: list[str]) -> str:
    """The detail of keys found in the OS keyring."""
    return t("cli.doctor.in_keyring", names=", ".join(variables))
