"""`nodes:`: device nodes (spec 000 "Device nodes"), which need the `http:` section.

- `url`: the address devices and phones reach the server at (the QR code points at
  `<url>/app/pair.html#CODE`); default: the `http.listen` address.
- `pair_ttl`: how long a pairing code lives (default 10m).
- `heartbeat`: how often both sides ping, and the server re-reads a live node from
  nodes.db (a revoke from another process cuts it within one beat); default 20s.
- `allow`: node name (or "*" for every node) -> the commands `node_invoke` runs on it
  without asking ("*" for all of them); anything else asks a human.

Each mistake is a ConfigError naming the file, line and key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

# What a node's name may be: it names a folder (nodes/<name>/ in the workspace) and a URL part.
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# A command a node may offer: dotted words (system.notify, files.get).
COMMAND = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


@dataclass
class NodesConfig:
    """`nodes`: pairing and the commands the agents may run on devices unasked."""

    url: str = ""
    pair_ttl: str = "10m"
    heartbeat: str = "20s"
    allow: dict[str, list[str]] = field(default_factory=dict)
    pair_ttl_seconds: float = field(default=600.0, init=False)
    heartbeat_seconds: float = field(default=20.0, init=False)

    def allows(self, node: str, command: str) -> bool:
        """Whether `command` on `node` runs without asking (nodes.allow)."""
        for key in (node, "*"):
            listed = self.allow.get(key, ())
            if "*" in listed or command in listed:
                return True
        return False


def resolve_nodes(nodes: NodesConfig, path: Path, http_url: str | None) -> None:
    """Check every value and fill the defaults; `http_url`: the http section's own address
    (None when there is no http section, which nodes need)."""

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(nodes, key)}: nodes.{key}: {message}")

    if http_url is None:
        raise ConfigError(
            f"{path}:{line_of(nodes)}: nodes: needs the http: section (devices connect to it)"
        )
    for key in ("pair_ttl", "heartbeat"):
        try:
            setattr(nodes, f"{key}_seconds", parse_duration(getattr(nodes, key)))
        except ValueError as exc:
            raise error(key, str(exc)) from None
    url = nodes.url.strip().rstrip("/") or http_url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise error("url", f"must be a plain http:// or https:// URL, not {nodes.url!r}")
    nodes.url = url
    for name, commands in nodes.allow.items():
        if name != "*" and not NODE_NAME.match(name):
            raise error("allow", f"{name!r} is not a node name (letters, digits, . _ -)")
        for command in commands:
            if command != "*" and not COMMAND.match(command):
                raise error(
                    "allow", f"{name}: {command!r} is not a command (e.g. system.notify, or *)"
                )
