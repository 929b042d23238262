"""The security audit (spec 000 "Operations", Security audit): what `habakkuk security
audit` prints, the overview lists and the dashboard shows.

`audit(home, config)` reads the home and the config and returns typed findings
(engine/audit_findings.py), worst first, each with its fix as one line: modes under the
home (agent workspaces excluded), agents in full mode or judged by a reviewer that
outsiders reach, open channels, the HTTP listener off loopback (no TLS, a missing,
unset or short token, public metrics), webhooks without a long secret of their own, MCP
servers that run commands, start through a shell or travel over plain http, device
commands that run programs or take pictures allowed unasked (nodes.allow), skills and
hook scripts others can write, backup archives others can read, and free disk space.
`apply_fixes` applies the permission changes (chmod) and nothing else.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from habakkuk.engine.audit_findings import Finding, Severity, sort_findings
from habakkuk.engine.i18n import t
from habakkuk.engine.toolsets import agents_offered

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Home

# A token or webhook secret shorter than this is "short" (openssl rand -hex 16 gives 32).
MIN_SECRET = 24
# The newest backup archive older than this many days is a finding.
BACKUP_MAX_DAYS = 30
# Free disk below these is a finding (high under the first, medium under the second or
# under LOW_DISK_SHARE of the disk).
DISK_CRITICAL = 256 * 1024 * 1024
DISK_LOW = 1024 * 1024 * 1024
LOW_DISK_SHARE = 0.05
BACKUP_PREFIX = "habakkuk-backup-"
# Folder modes are checked this deep under the home (agents/NAME, channels/ACCOUNT): a
# tool's own folders further down (a git repository's objects) would only be noise.
FOLDER_DEPTH = 2
# Files under the home that hold credentials (0600, high when others can read them).
CREDENTIAL_NAMES = frozenset({".env", ".env.bak", "auth.json", "node.json", "config.yaml.bak"})
# Folders whose every file is a credential (the chat adapters' device keys and sessions).
CREDENTIAL_FOLDERS = frozenset({"channels", "credentials"})
DATABASE_SUFFIXES = (".db", ".db-wal", ".db-shm", ".db-journal")
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "cmd", "cmd.exe", "pwsh"})
SHELL_SIGNS = frozenset("|;&$`<>")
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


class DiskUsage(NamedTuple):
    """What shutil.disk_usage answers."""

    total: int
    used: int
    free: int


def audit(
    home: Home,
    config: Config | None,
    *,
    cwd: Path | None = None,
    env: Callable[[str], str | None] | None = None,
    disk: Callable[[Path], DiskUsage] | None = None,
    now: float | None = None,
) -> list[Finding]:
    """Every finding for `home` and its `config` (None: the config could not be read, so
    only the files are checked), worst first.

    `cwd` is also searched for backup archives (default the current folder); `env` reads
    a variable (default the process environment, then the home's .env); `disk` measures
    free space (shutil.disk_usage); `now` is the clock (time.time()).
    """
    if env is None:
        from habakkuk.engine.errors import ConfigError
        from habakkuk.engine.home import Environment

        try:
            env = Environment(home.env_path if home.env_path.is_file() else None).get
        except (ConfigError, OSError):  # an unreadable .env: doctor says so; here, the process's
            env = os.environ.get
    found: list[Finding] = []
    if home.root.is_dir():
        found += _modes(home, config)
        found += _skills(home)
    if config is not None:
        found += _reach(config)
        found += _http(config, env)
        found += _mcp(config)
        found += _nodes(config)
        found += _hooks(home, config)
    found += _backups(home, cwd or Path.cwd(), time.time() if now is None else now)
    found += _disk(home, disk or _disk_usage)
    return sort_findings([_short(home.root, finding) for finding in found])


def _short(root: Path, finding: Finding) -> Finding:
    """The finding with a subject under the home named relative to it (the fix keeps the
    whole path, to be run from anywhere)."""
    import dataclasses

    subject = Path(finding.subject)
    if subject.is_absolute() and subject != root and subject.is_relative_to(root):
        return dataclasses.replace(finding, subject=str(subject.relative_to(root)))
    return finding


def apply_fixes(findings: list[Finding]) -> list[tuple[Finding, str]]:
    """Apply each finding's permission change (nothing else is ever changed); returns the
    ones that could not be applied, each with why."""
    failed: list[tuple[Finding, str]] = []
    for finding in findings:
        if finding.chmod is None or not finding.path:
            continue
        try:
            os.chmod(finding.path, finding.chmod, follow_symlinks=False)
        except NotImplementedError:  # a platform without lchmod: the link itself is skipped
            failed.append((finding, "symbolic link"))
        except OSError as exc:
            failed.append((finding, exc.strerror or str(exc)))
    return failed


# -- modes under the home --------------------------------------------------------------------


def _who(mode: int, bits_group: int, bits_other: int) -> str:
    group, other = bool(mode & bits_group), bool(mode & bits_other)
    if group and other:
        return t("audit.who_both")
    return t("audit.who_group") if group else t("audit.who_others")


def _octal(mode: int) -> str:
    return f"{stat.S_IMODE(mode):04o}"


def _chmod_fix(path: Path, mode: int) -> str:
    return f"chmod {mode:o} {shlex.quote(str(path))}"


def _excluded(home: Home, config: Config | None) -> set[Path]:
    """The agent workspaces (the agents' own files, never audited)."""
    agents = home.root / "agents"
    skip = {child / "workspace" for child in agents.iterdir()} if agents.is_dir() else set()
    if config is not None:
        skip |= {Path(agent.workspace_path).absolute() for agent in config.agents.values()}
    return skip


def _owner(info: os.stat_result, path: Path, check_path: str) -> Iterator[Finding]:
    uid = getattr(os, "getuid", lambda: None)()
    if uid is None or info.st_uid == uid:
        return
    try:
        import pwd

        owner = pwd.getpwuid(info.st_uid).pw_name
    except (ImportError, KeyError):
        owner = str(info.st_uid)
    try:
        import pwd

        me = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        me = str(uid)
    yield Finding(
        "medium",
        "owner",
        str(path),
        t("audit.not_owned", owner=owner),
        f"chown {me} {shlex.quote(check_path)}",
        check_path,
    )


def _lstat(path: Path) -> os.stat_result | None:
    """The path's own status; None when it went away meanwhile (a database's -wal file
    removed at a checkpoint, a session file) or cannot be read."""
    try:
        return path.lstat()
    except OSError:
        return None


def _file_kind(path: Path, root: Path) -> str:
    """credential, private (a database or a log) or "" (not checked)."""
    name = path.name
    parts = path.relative_to(root).parts
    if name.startswith(BACKUP_PREFIX):
        return ""  # the backups' own check
    if name in CREDENTIAL_NAMES or (parts and parts[0] in CREDENTIAL_FOLDERS):
        return "credential"
    if name.endswith(DATABASE_SUFFIXES) or name.startswith("habakkuk.log"):
        return "private"
    return ""


def _modes(home: Home, config: Config | None) -> Iterator[Finding]:
    root = home.root
    info = root.stat()
    if info.st_mode & 0o077:
        yield Finding(
            "high",
            "modes",
            str(root),
            t("audit.home_open", who=_who(info.st_mode, 0o070, 0o007), mode=_octal(info.st_mode)),
            _chmod_fix(root, 0o700),
            str(root),
            0o700,
        )
    yield from _owner(info, root, str(root))
    skip = _excluded(home, config)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        depth = len(here.relative_to(root).parts)
        # the skills have a check of their own; workspaces are the agents' files; the
        # insides of checkpoint repositories and blobs are git's and content, not settings
        checked = [
            name
            for name in dirs
            if here / name not in skip and not (depth == 0 and name == "skills")
        ]
        dirs[:] = [
            name
            for name in checked
            if not (depth == 0 and name == "blobs")
            and not (depth == 1 and here.name == "checkpoints")
        ]
        for name in checked if depth < FOLDER_DEPTH else []:
            path = here / name
            sub = _lstat(path)
            if sub is None or stat.S_ISLNK(sub.st_mode):
                continue
            if sub.st_mode & 0o077:
                # Behind a private home nobody else can walk in: a slip, not an opening.
                level: Severity = "medium" if info.st_mode & 0o077 else "low"
                problem = t("audit.folder_open", mode=_octal(sub.st_mode))
                fix = _chmod_fix(path, 0o700)
                yield Finding(level, "modes", str(path), problem, fix, str(path), 0o700)
            yield from _owner(sub, path, str(path))
        for name in files:
            path = here / name
            kind = _file_kind(path, root)
            if not kind:
                continue
            sub = _lstat(path)
            if sub is None or not stat.S_ISREG(sub.st_mode):
                continue
            if sub.st_mode & 0o066:
                severity: Severity = "high" if kind == "credential" else "medium"
                key = "audit.credential_open" if kind == "credential" else "audit.file_open"
                who = _who(sub.st_mode, 0o060, 0o006)
                yield Finding(
                    severity,
                    "modes",
                    str(path),
                    t(key, who=who, mode=_octal(sub.st_mode)),
                    _chmod_fix(path, 0o600),
                    str(path),
                    0o600,
                )
            yield from _owner(sub, path, str(path))


# -- skills and hooks ------------------------------------------------------------------------


def _skill_roots(home: Home) -> list[Path]:
    roots = [home.root / "skills"]
    agents = home.root / "agents"
    if agents.is_dir():
        roots += sorted(child / "skills" for child in agents.iterdir())
    return [root for root in roots if root.is_dir() and not root.is_symlink()]


def _writable(path: Path, info: os.stat_result, check: str, key: str) -> Iterator[Finding]:
    if info.st_mode & 0o022:
        wanted = stat.S_IMODE(info.st_mode) & ~0o022
        yield Finding(
            "high",
            check,
            str(path),
            t(key, who=_who(info.st_mode, 0o020, 0o002), mode=_octal(info.st_mode)),
            _chmod_fix(path, wanted),
            str(path),
            wanted,
        )


def _skills(home: Home) -> Iterator[Finding]:
    inside = home.root.resolve()
    for base in _skill_roots(home):
        for folder, dirs, files in os.walk(base):
            here = Path(folder)
            for name in [*dirs, *files]:
                path = here / name
                info = _lstat(path)
                if info is None:
                    continue
                if stat.S_ISLNK(info.st_mode):
                    target = path.resolve()
                    if not target.is_relative_to(inside):
                        yield Finding(
                            "medium",
                            "skills",
                            str(path),
                            t("audit.skill_link", target=target),
                            t("audit.fix_skill_link"),
                        )
                    continue
                yield from _writable(path, info, "skills", "audit.skill_writable")
                yield from (
                    Finding("high", "skills", f.subject, f.problem, f.fix, f.path)
                    for f in _owner(info, path, str(path))
                )
                if stat.S_ISREG(info.st_mode) and info.st_mode & 0o111:
                    yield Finding(
                        "low",
                        "skills",
                        str(path),
                        t("audit.skill_executable"),
                        t("audit.fix_skill_executable"),
                    )


def _hooks(home: Home, config: Config) -> Iterator[Finding]:
    seen: set[Path] = set()
    for hook in config.hooks:
        try:
            words = shlex.split(hook.command)
        except ValueError:
            continue
        base = hook.cwd or home.root
        for word in words:
            path = Path(word).expanduser()
            path = path if path.is_absolute() else base / path
            if path in seen or "/" not in word or not path.is_file():
                continue
            seen.add(path)
            info = _lstat(path.resolve())
            if info is not None:
                yield from _writable(path, info, "hooks", "audit.hook_writable")


# -- who reaches the agents -------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _outsiders(config: Config) -> dict[str, list[str]]:
    """Each agent outsiders reach, with how (a channel open to all, a webhook, the API)."""
    reach: dict[str, list[str]] = {}
    fallback = config.default_agent or ""
    for name, channel in sorted(config.channels.items()):
        if channel.type == "web" or not channel.allow_all:
            continue
        agents = {channel.agent or fallback} | {route.agent for route in channel.routes}
        for agent in agents:
            reach.setdefault(agent, []).append(t("audit.via_channel", name=name))
    if config.http is not None:
        for name, hook in sorted(config.http.hooks.items()):
            reach.setdefault(hook.agent or fallback, []).append(t("audit.via_webhook", name=name))
        if not _is_loopback(config.http.host):
            for agent in config.agents:
                reach.setdefault(agent, []).append(t("audit.via_http", listen=config.http.listen))
    return reach


def _reach(config: Config) -> Iterator[Finding]:
    reach = _outsiders(config)
    for name, agent in sorted(config.agents.items()):
        subject = f"agents.{name}"
        via = ", ".join(reach.get(name, []))
        if agent.mode == "full" and via:
            problem = t("audit.full_reachable", agent=name, via=via)
            yield Finding("critical", "reach", subject, problem, t("audit.fix_mode", agent=name))
        elif agent.mode == "full":
            problem = t("audit.full_mode", agent=name)
            yield Finding("medium", "reach", subject, problem, t("audit.fix_mode", agent=name))
        if agent.approvals == "reviewer" and via:
            problem = t("audit.reviewer_reachable", agent=name, via=via)
            fix = t("audit.fix_approvals", agent=name)
            yield Finding("high", "reach", subject, problem, fix)
    fallback = config.default_agent or ""
    for name, channel in sorted(config.channels.items()):
        if channel.type != "web" and channel.allow_all:
            yield Finding(
                "medium",
                "channels",
                f"channels.{name}",
                t("audit.channel_open", name=name, agent=channel.agent or fallback),
                t("audit.fix_allow_from", name=name),
            )


# -- the HTTP surface ------------------------------------------------------------------------


def _secret(
    env: Callable[[str], str | None], variable: str, key: str, check: str, subject: str
) -> Iterator[Finding]:
    value = env(variable) or ""
    fix = t("audit.fix_token", variable=variable)
    if not value:
        problem = t("audit.token_unset", variable=variable, key=key)
        yield Finding("high", check, subject, problem, fix)
    elif len(value) < MIN_SECRET:
        problem = t("audit.token_short", variable=variable, key=key, length=len(value))
        yield Finding("medium", check, subject, problem, fix)


def _http(config: Config, env: Callable[[str], str | None]) -> Iterator[Finding]:
    http = config.http
    if http is None:
        return
    outside = not _is_loopback(http.host)
    if outside:
        problem = t("audit.http_no_tls", listen=http.listen)
        yield Finding("medium", "http", "http.listen", problem, t("audit.fix_http_tls"))
        if http.token_env is None:
            problem = t("audit.http_no_token", listen=http.listen)
            yield Finding("high", "http", "http.token_env", problem, t("audit.fix_http_token"))
        else:
            yield from _secret(env, http.token_env, "http.token_env", "http", "http.token_env")
    if http.metrics.public:
        yield Finding(
            "medium" if outside else "low",
            "metrics",
            "http.metrics.public",
            t("audit.metrics_public", listen=http.listen),
            t("audit.fix_metrics"),
        )
    for name, hook in sorted(http.hooks.items()):
        subject = f"http.hooks.{name}"
        if hook.secret_env is None:
            severity: Severity = "high" if http.token_env is None else "medium"
            problem = t("audit.webhook_no_secret", name=name)
            yield Finding(severity, "webhooks", subject, problem, t("audit.fix_webhook", name=name))
        else:
            yield from _secret(env, hook.secret_env, f"{subject}.secret_env", "webhooks", subject)


# -- MCP servers -----------------------------------------------------------------------------


def _through_shell(command: str, args: list[str]) -> bool:
    program = Path(command).name.lower()
    if program in SHELLS and any(arg in ("-c", "/c", "-Command") for arg in args):
        return True
    return any(sign in command for sign in SHELL_SIGNS)


def _mcp(config: Config) -> Iterator[Finding]:
    reach = _outsiders(config)
    for name, server in sorted(config.mcp_servers.items()):
        subject = f"mcp_servers.{name}"
        if server.risk == "exec":
            agents = agents_offered(config.agents, name)
            exposed = [a for a in agents if a in reach or config.agents[a].mode == "full"]
            if exposed:
                problem = t("audit.mcp_exec_exposed", name=name, agents=", ".join(exposed))
                severity: Severity = "high"
            else:
                problem, severity = t("audit.mcp_exec", name=name), "medium"
            yield Finding(severity, "mcp", subject, problem, t("audit.fix_mcp_exec", name=name))
        if server.command and _through_shell(server.command, server.args):
            line = " ".join([server.command, *server.args])[:80]
            problem = t("audit.mcp_shell", name=name, command=line)
            yield Finding("medium", "mcp", subject, problem, t("audit.fix_mcp_shell", name=name))
        if server.url and server.url.lower().startswith("http://"):
            from urllib.parse import urlsplit

            if not _is_loopback(urlsplit(server.url).hostname or ""):
                credentials = bool(server.headers or server.auth)
                problem = t("audit.mcp_http", name=name, url=server.url)
                fix = t("audit.fix_mcp_http", name=name)
                yield Finding("high" if credentials else "medium", "mcp", subject, problem, fix)


# Device commands that run programs or take pictures on the device: allowed unasked (in
# nodes.allow, or through "*"), any prompt injection reaches the person's own machine.
DANGEROUS_NODE_COMMANDS = ("system.run", "camera.snap", "files.put")


def _nodes(config: Config) -> Iterator[Finding]:
    if config.nodes is None:
        return
    for node, commands in sorted(config.nodes.allow.items()):
        listed = [c for c in DANGEROUS_NODE_COMMANDS if c in commands or "*" in commands]
        if listed:
            who = t("audit.nodes_every") if node == "*" else node
            problem = t("audit.nodes_dangerous", node=who, commands=", ".join(listed))
            fix = t("audit.fix_nodes_dangerous", node=node)
            yield Finding("high", "nodes", f"nodes.allow.{node}", problem, fix)


# -- backups and disk ------------------------------------------------------------------------


def _backups(home: Home, cwd: Path, now: float) -> Iterator[Finding]:
    folders = [home.root, home.root / "backups", cwd]
    archives: dict[Path, os.stat_result] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.glob(f"{BACKUP_PREFIX}*"):
            info = _lstat(path)
            if info is not None and stat.S_ISREG(info.st_mode):
                archives[path.absolute()] = info
    for path, info in sorted(archives.items()):
        mode = info.st_mode
        if mode & 0o066:
            yield Finding(
                "high",
                "backups",
                str(path),
                t(
                    "audit.backup_open",
                    who=_who(info.st_mode, 0o060, 0o006),
                    mode=_octal(info.st_mode),
                ),
                _chmod_fix(path, 0o600),
                str(path),
                0o600,
            )
    if not archives:
        yield Finding(
            "info", "backups", str(home.root), t("audit.backup_none"), t("audit.fix_backup")
        )
    else:
        newest = max(info.st_mtime for info in archives.values())
        days = int((now - newest) // 86400)
        if days > BACKUP_MAX_DAYS:
            problem = t("audit.backup_old", days=days)
            yield Finding("low", "backups", str(home.root), problem, t("audit.fix_backup"))
    stale = home.root / "backups"
    if stale.is_dir():
        for path in sorted(stale.iterdir()):
            name = path.name
            if name.startswith((".env", "auth.json")) or name.endswith((".env", ".pem", ".key")):
                yield Finding(
                    "low",
                    "backups",
                    str(path),
                    t("audit.backup_credentials"),
                    t("audit.fix_remove", path=shlex.quote(str(path))),
                )


def _disk_usage(path: Path) -> DiskUsage:
    total, used, free = shutil.disk_usage(path)
    return DiskUsage(total, used, free)


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def _disk(home: Home, disk: Callable[[Path], DiskUsage]) -> Iterator[Finding]:
    where = home.root
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        usage = disk(where)
    except OSError:
        return
    free, subject = _size(usage.free), str(home.root)
    low = usage.free < DISK_LOW or (usage.total > 0 and usage.free / usage.total < LOW_DISK_SHARE)
    if not low:
        yield Finding("info", "disk", subject, t("audit.disk_ok", free=free), t("audit.fix_none"))
        return
    severity: Severity = "high" if usage.free < DISK_CRITICAL else "medium"
    yield Finding(severity, "disk", subject, t("audit.disk_low", free=free), t("audit.fix_disk"))
