"""Plugins in the loaded config: `habakkuk-plugin.yaml` and the merge of enabled plugins.

A plugin is a folder (installed as HOME/plugins/<name>/) with a `habakkuk-plugin.yaml` at
its root that bundles MCP servers, a folder of skills, hooks and chat commands
(spec 000 "Plugins"). The format:

    name: github-tools            # required; the plugin's folder name, ^[a-z0-9][a-z0-9-]{0,63}$
    description: Issues and PRs   # required; one line
    version: 1.2.0                # optional, shown by `habakkuk plugins list`
    mcp_servers:                  # optional; the shape of config.yaml's mcp_servers
      issues:
        command: ./bin/issues-server    # a relative path is the plugin folder's
        args: [--fast]
        env: {GITHUB_TOKEN: GITHUB_TOKEN} # named variables, as in config.yaml
    skills: skills                # optional; a folder of skill folders (default: skills/
                                  # when the plugin has one)
    hooks:                        # optional; the shape of config.yaml's hooks
      - {event: tool_after, command: ./log-tool.sh, match: "^exec$"}
    commands:                     # optional; chat commands, /name in every surface
      standup:
        summary: write my stand-up from yesterday's sessions
        prompt: Write my stand-up for today from yesterday's sessions.
      deploy:
        summary: deploy the site and show the log
        script: ./deploy.sh       # run with /bin/sh -c in the plugin folder
        timeout: 2m               # default 30s

Unknown keys, wrong types and bad values are errors naming the file, the line and the key,
as in config.yaml (the same NodeLoader reads both).

Nothing in a plugin loads until `habakkuk plugins enable NAME` has set `enabled` and
`approved` in HOME/plugins/.lock.json (knowledge/hub/lock.py's format; `read_lock_file`
here is the one reader of its JSON, which the knowledge side reuses). `merge_plugins`,
called by `load_config`, then merges each enabled plugin into the Config it returns
without touching config.yaml:

- Servers join `config.mcp_servers` named `<plugin>` when the plugin has one server and
  `<plugin>-<server>` when it has several, so their toolsets are `mcp:<plugin>` or
  `mcp:<plugin>-<server>`. A stdio server runs in the plugin folder. Each toolset is added
  to every agent on the default toolsets, as config.yaml's own servers are
  (engine/toolsets.py); an agent whose config lists `toolsets` gets exactly that list
  (config.yaml is checked before plugins merge, so it cannot name a plugin's toolset: a
  disabled plugin never makes config.yaml invalid).
- Hooks join `config.hooks` and run in the plugin folder (HookConfig.cwd) instead of HOME.
- The skills folder joins `config.plugin_skill_dirs` (shared skills, scope "plugin").
- Commands join `config.plugin_commands` unless another plugin took the name first (one
  line in plugin_problems). The engine does not know the chat's built-in commands: the
  command layer (conversation/plugin_commands.py) looks built-ins up first, so a plugin
  never overrides one, and reports the shadowed ones (`shadowed_commands`), which doctor
  prints.

A plugin that fails to load (folder missing, bad YAML, a bad server, a server or toolset
name config.yaml already uses) adds one line to `config.plugin_problems` and is skipped
whole; the rest load. It is never fatal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import GenericAlias
from typing import Any

import yaml

from .config_schema import NodeLoader, check_hooks, compose_yaml, line_of
from .errors import ConfigError
from .toolsets import offer_to_default_agents

PLUGIN_FILE = "habakkuk-plugin.yaml"
PLUGINS_DIR = "plugins"
LOCK_FILE = ".lock.json"
DEFAULT_SKILLS = "skills"
DEFAULT_SCRIPT_TIMEOUT = 30.0
PLUGIN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")  # the skills' SKILL_NAME rule
COMMAND_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")  # what `/name` parses as, lowercased


@dataclass(frozen=True)
class ConfigParts:
    """What the plugins use of engine/config.py, handed in by it (`config.plugin_parts()`)
    so that this module does not import config.py, which calls it."""

    config: type  # Config
    server: type  # McpServerConfig
    hook: type  # HookConfig
    command: type  # PluginCommand
    resolve_mcp: Callable[[Any], None]  # config.yaml's checks of mcp_servers
    parse_duration: Callable[[float | str], float]


@dataclass
class PluginCommandSpec:
    """One entry of `commands:`: a prompt, or a script and its timeout."""

    summary: str
    prompt: str | None = None
    script: str | None = None
    timeout: float | str = DEFAULT_SCRIPT_TIMEOUT


@dataclass
class PluginManifest:
    """`habakkuk-plugin.yaml`, as read (see the module docstring)."""

    name: str
    description: str
    version: str = ""
    # Read with the config's own classes (McpServerConfig, HookConfig) by load_manifest.
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    skills: str | None = None
    hooks: list[Any] = field(default_factory=list)
    commands: dict[str, PluginCommandSpec] = field(default_factory=dict)
    folder: Path = field(default=Path("."), init=False)
    skills_dir: Path | None = field(default=None, init=False)  # resolved, None when none


def read_lock_file(folder: Path) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The raw entries of `folder`/.lock.json (name -> its JSON object) and a one-line
    problem (None when fine); a missing file is no entries and no problem."""
    path = folder / LOCK_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"{path}: cannot read: {exc.strerror}"
    try:
        data = json.loads(text)
        entries = data["entries"]
        if not isinstance(entries, dict):
            raise TypeError("entries is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        return {}, f"{path}: not a lock file Habakkuk can read ({exc}); entries ignored"
    return {str(k): v for k, v in entries.items() if isinstance(v, dict)}, None


def enabled_plugins(home_root: Path) -> tuple[list[str], str | None]:
    """The names of the plugins enabled and approved in HOME/plugins/.lock.json, sorted,
    and the lock file's problem (None when fine)."""
    entries, problem = read_lock_file(home_root / PLUGINS_DIR)
    names = [
        name
        for name, entry in entries.items()
        if entry.get("enabled") is True and entry.get("approved") is True
    ]
    return sorted(names), problem


def plugin_folder(home_root: Path, name: str) -> Path:
    """Where plugin `name` is installed."""
    return home_root / PLUGINS_DIR / name


def load_manifest(folder: Path, parts: ConfigParts) -> PluginManifest:
    """Read and check `folder`/habakkuk-plugin.yaml; ConfigError naming file and line."""
    path = folder / PLUGIN_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: missing (a plugin needs {PLUGIN_FILE} at its root)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    node = compose_yaml(text, path)
    if node is None:
        raise ConfigError(f"{path}:1: the file is empty; it needs name: and description:")
    loader = NodeLoader(path)
    # The servers and hooks are read with config.yaml's classes, so their errors and
    # lines are the same; the rest of the manifest with PluginManifest.
    typed: dict[str, object] = {
        "mcp_servers": GenericAlias(dict, (str, parts.server)),
        "hooks": GenericAlias(list, (parts.hook,)),
    }
    sections: dict[str, Any] = {}
    if isinstance(node, yaml.MappingNode):
        rest = []
        for key_node, value_node in node.value:
            key = str(loader.scalar(key_node))
            if key in typed and key not in sections:
                sections[key] = loader.load(value_node, typed[key], key)
            else:
                rest.append((key_node, value_node))
        node = yaml.MappingNode(node.tag, rest, node.start_mark, node.end_mark)
    manifest: PluginManifest = loader.load_dataclass(node, PluginManifest, "")
    manifest.mcp_servers = sections.get("mcp_servers", {})
    manifest.hooks = sections.get("hooks", [])
    manifest.folder = folder
    if not PLUGIN_NAME.fullmatch(manifest.name):
        raise ConfigError(
            f"{path}:{line_of(manifest, 'name')}: name: {manifest.name!r} is not a plugin name "
            "(lowercase letters, digits and dashes, at most 64)"
        )
    if not manifest.description.strip():
        raise ConfigError(f"{path}:{line_of(manifest, 'description')}: description: is empty")
    # The servers are checked by config.yaml's own rules (their lines are this file's).
    probe = parts.config(mcp_servers=manifest.mcp_servers)
    probe.path = path
    parts.resolve_mcp(probe)
    for server in manifest.mcp_servers.values():
        if server.command is not None and "/" in server.command:
            command = Path(server.command)
            if not command.is_absolute():
                server.command = str(folder / command)
    check_hooks(path, manifest.hooks)
    for name, spec in manifest.commands.items():
        where = f"{path}:{line_of(spec)}: commands.{name}"
        if not COMMAND_NAME.fullmatch(name):
            raise ConfigError(f"{where}: a command name is lowercase letters, digits, - and _")
        if (spec.prompt is None) == (spec.script is None):
            raise ConfigError(f"{where}: give either prompt or script")
        if not (spec.prompt or spec.script or "").strip():
            raise ConfigError(
                f"{where}: {'prompt' if spec.prompt is not None else 'script'} is empty"
            )
        try:
            spec.timeout = parts.parse_duration(spec.timeout)
        except ValueError as exc:
            raise ConfigError(
                f"{path}:{line_of(spec, 'timeout')}: commands.{name}.timeout: {exc}"
            ) from None
    manifest.skills_dir = _skills_dir(path, manifest)
    return manifest


def _skills_dir(path: Path, manifest: PluginManifest) -> Path | None:
    """The plugin's skills folder: `skills:` (which must exist, inside the plugin), else
    skills/ when present."""
    folder = manifest.folder
    if manifest.skills is None:
        default = folder / DEFAULT_SKILLS
        return default if default.is_dir() and not default.is_symlink() else None
    where = f"{path}:{line_of(manifest, 'skills')}: skills"
    relative = Path(manifest.skills)
    if relative.is_absolute() or ".." in relative.parts:
        raise ConfigError(f"{where}: {manifest.skills!r} must be a folder inside the plugin")
    target = folder / relative
    if not target.is_dir() or target.is_symlink():
        raise ConfigError(f"{where}: {manifest.skills!r} is not a folder of the plugin")
    return target


def server_names(manifest: PluginManifest) -> dict[str, str]:
    """The plugin's server names -> the names they take in config.mcp_servers."""
    names = sorted(manifest.mcp_servers)
    if len(names) == 1:
        return {names[0]: manifest.name}
    return {name: f"{manifest.name}-{name}" for name in names}


def merge_plugins(config: Any, home_root: Path, parts: ConfigParts) -> None:
    """Merge every enabled plugin of `home_root` into `config` (a loaded Config); a plugin
    that fails to load is one line in config.plugin_problems and changes nothing."""
    names, problem = enabled_plugins(home_root)
    if problem:
        config.plugin_problems.append(f"plugins: {problem}")
    for name in names:
        folder = plugin_folder(home_root, name)
        try:
            if not folder.is_dir():
                raise ConfigError(f"{folder}: the plugin's folder is missing")
            manifest = load_manifest(folder, parts)
            if manifest.name != name:
                raise ConfigError(
                    f"{folder / PLUGIN_FILE}:{line_of(manifest, 'name')}: name: "
                    f"{manifest.name!r} is not the plugin's name {name!r}"
                )
            renamed = server_names(manifest)
            for server, merged in renamed.items():
                if merged in config.mcp_servers:
                    raise ConfigError(
                        f"{folder / PLUGIN_FILE}:{line_of(manifest.mcp_servers[server])}: "
                        f"mcp_servers.{server}: the name {merged!r} is taken in "
                        f"{config.path}; the plugin's servers were not added"
                    )
        except ConfigError as exc:
            config.plugin_problems.append(f"plugin {name}: {exc}")
            continue
        # Checked whole: now merge.
        for server, merged in renamed.items():
            entry = manifest.mcp_servers[server]
            entry.name = merged
            entry.cwd = folder
            config.mcp_servers[merged] = entry
            offer_to_default_agents(config.agents.values(), merged)
        for hook in manifest.hooks:
            hook.cwd = folder
            hook.plugin = name
            config.hooks.append(hook)
        if manifest.skills_dir is not None:
            config.plugin_skill_dirs.append((name, manifest.skills_dir))
        for command, spec in manifest.commands.items():
            taken = config.plugin_commands.get(command)
            if taken is not None:
                config.plugin_problems.append(
                    f"plugin {name}: command /{command} is taken by plugin {taken.plugin}; "
                    "not added"
                )
                continue
            config.plugin_commands[command] = parts.command(
                name=command,
                plugin=name,
                summary=spec.summary,
                prompt=spec.prompt,
                script=spec.script,
                folder=folder,
                timeout=float(spec.timeout),
            )
