"""What a plugin will run, shown by `habakkuk plugins enable` before it asks, and by `show`.

Every process the plugin can start is listed: each MCP server's command and arguments (or
URL) with the names of the variables it is given, each hook's event, match and command,
each script command, and each prompt command's prompt; then the skills it shares and the
files of the plugin that enabling makes executable (programs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from habakkuk.engine.plugin_config import PluginManifest, load_manifest, server_names

from .programs import named_programs


@dataclass(frozen=True)
class PluginDescription:
    """A plugin's manifest as the user reads it before enabling it."""

    name: str
    description: str
    version: str
    folder: Path
    servers: list[dict[str, Any]] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    # The plugin's files it runs as programs: made executable when it is enabled.
    programs: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The description as text, one thing it runs per line."""
        version = f" {self.version}" if self.version else ""
        out = [f"{self.name}{version}: {self.description}", f"  folder: {self.folder}"]
        if not (self.servers or self.hooks or self.commands or self.skills):
            out.append("  runs nothing and shares no skills")
        for s in self.servers:
            variables = ", ".join(s["env"] + s["headers"]) or "none"
            if s["url"]:
                out.append(f"  MCP server {s['name']} (toolset mcp:{s['name']}): {s['url']}")
            else:
                argv = " ".join([s["command"], *s["args"]])
                out.append(
                    f"  MCP server {s['name']} (toolset mcp:{s['name']}): runs `{argv}` "
                    "in the plugin folder"
                )
            out.append(f"    variables: {variables}; risk: {s['risk']}")
        for h in self.hooks:
            match = f" matching {h['match']!r}" if h["match"] else ""
            out.append(f"  hook on {h['event']}{match}: runs `{h['command']}`")
        for c in self.commands:
            if c["script"] is not None:
                out.append(
                    f"  command /{c['name']}: runs `{c['script']}` (timeout {c['timeout']:g}s)"
                )
            else:
                out.append(f"  command /{c['name']}: sends the prompt {_short(c['prompt'])!r}")
        if self.skills:
            out.append(f"  skills (shared): {', '.join(self.skills)}")
        if self.programs:
            out.append(f"  made executable when enabled: {', '.join(self.programs)}")
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "folder": str(self.folder),
            "servers": self.servers,
            "hooks": self.hooks,
            "commands": self.commands,
            "skills": self.skills,
            "programs": self.programs,
        }


def _short(text: str, limit: int = 120) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def describe(folder: Path) -> PluginDescription:
    """What the plugin in `folder` runs; ConfigError when its manifest is bad."""
    from habakkuk.engine.config import plugin_parts

    return describe_manifest(load_manifest(folder, plugin_parts()))


def describe_manifest(manifest: PluginManifest) -> PluginDescription:
    """What `manifest`'s plugin runs (see the module docstring)."""
    renamed = server_names(manifest)
    servers = [
        {
            "name": renamed[name],
            "command": server.command,
            "args": list(server.args),
            "url": server.url,
            "env": sorted(server.env.values()),
            "headers": sorted(server.headers.values()),
            "risk": server.risk,
        }
        for name, server in sorted(manifest.mcp_servers.items())
    ]
    hooks = [
        {"event": h.event, "command": h.command, "match": h.match, "timeout": h.timeout}
        for h in manifest.hooks
    ]
    commands = [
        {
            "name": name,
            "summary": spec.summary,
            "prompt": spec.prompt,
            "script": spec.script,
            "timeout": float(spec.timeout),
        }
        for name, spec in sorted(manifest.commands.items())
    ]
    skills: list[str] = []
    if manifest.skills_dir is not None:
        skills = sorted(
            p.name
            for p in manifest.skills_dir.iterdir()
            if p.is_dir() and not p.is_symlink() and (p / "SKILL.md").is_file()
        )
    return PluginDescription(
        manifest.name,
        manifest.description,
        manifest.version,
        manifest.folder,
        servers,
        hooks,
        commands,
        skills,
        named_programs(manifest),
    )
