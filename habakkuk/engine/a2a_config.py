"""`a2a:`: the Agent2Agent protocol (spec 000 "Agent2Agent"), and its checks.

- `serve: true` (with the `http` section) publishes the served agents at /a2a and their
  Agent Cards; `agents` names them, each with its skill's description (default: every
  agent, described by its own description).
- `token_env` names the variable holding the bearer token A2A callers send; without it
  the HTTP token is asked (and none on a loopback-only server without one).
- `peers` are other agents the a2a toolset may call by name: a base URL or a card URL,
  headers resolved like MCP headers (header -> the variable holding its value), and how
  long a sent message may keep working (`timeout`, default 5 minutes).
- `send_wait` bounds how long a blocking message/send (SendMessage) holds its request
  open for the turn (default 5 minutes): past it the call answers with the task as it
  stands, still working, and the caller follows it with tasks/get or a resubscribe.

Each mistake is a ConfigError naming the file, line and key.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PEER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
DEFAULT_PEER_TIMEOUT = 300.0
DEFAULT_SEND_WAIT = 300.0


@dataclass
class A2APeerConfig:
    """`a2a.peers.NAME`: another A2A agent the a2a toolset calls by name."""

    url: str
    # header -> the variable (process env or HOME/.env) holding its value
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | str = "5m"
    name: str = field(default="", init=False)
    timeout_seconds: float = field(default=DEFAULT_PEER_TIMEOUT, init=False)


@dataclass
class A2AConfig:
    """`a2a`: Habakkuk's agents served over A2A, and the peers its agents may call."""

    serve: bool = False
    # agent -> its skill's description on the card ("" : the agent's own description)
    agents: dict[str, str] | None = None
    token_env: str | None = None
    peers: dict[str, A2APeerConfig] = field(default_factory=dict)
    # how long a blocking send holds its request for the turn before answering "working"
    send_wait: float | str = "5m"
    send_wait_seconds: float = field(default=DEFAULT_SEND_WAIT, init=False)


def resolve_a2a(a2a: A2AConfig, agents: Collection[str], has_http: bool, path: Path) -> None:
    """Check every value against the configured `agents` and whether the http section is
    there (ConfigError naming the line), and derive the peers' fields."""

    def error(section: object, key: str, where: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(section, key)}: {where}: {message}")

    if a2a.serve and not has_http:
        raise error(a2a, "serve", "a2a.serve", "needs the http section (the server it rides on)")
    if a2a.token_env is not None and not _NAME.match(a2a.token_env):
        raise error(a2a, "token_env", "a2a.token_env", f"{a2a.token_env!r} is not a variable name")
    try:
        a2a.send_wait_seconds = parse_duration(a2a.send_wait)
    except ValueError as exc:
        raise error(a2a, "send_wait", "a2a.send_wait", str(exc)) from None
    if a2a.agents is not None:
        if not a2a.agents:
            raise error(
                a2a, "agents", "a2a.agents", "names no agent; leave it out to serve every agent"
            )
        for agent in a2a.agents:
            if agent not in agents:
                known = ", ".join(sorted(agents)) or "none"
                raise error(
                    a2a, "agents", f"a2a.agents.{agent}", f"is not a configured agent ({known})"
                )
    for name, peer in a2a.peers.items():
        where = f"a2a.peers.{name}"
        if not _PEER.match(name):
            raise error(a2a, "peers", where, "a peer's name is letters, digits, '.', '_', '-'")
        peer.name = name
        parts = urlsplit(peer.url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise error(peer, "url", f"{where}.url", "must be an http:// or https:// URL")
        if parts.fragment:
            raise error(peer, "url", f"{where}.url", "must not have a #fragment")
        for header, variable in peer.headers.items():
            if not _HEADER.match(header):
                raise error(peer, "headers", f"{where}.headers", f"{header!r} is not a header")
            if not _NAME.match(variable):
                raise error(
                    peer, "headers", f"{where}.headers.{header}", f"{variable!r} is not a variable"
                )
        try:
            peer.timeout_seconds = parse_duration(peer.timeout)
        except ValueError as exc:
            raise error(peer, "timeout", f"{where}.timeout", str(exc)) from None


def served_agents(a2a: A2AConfig | None, agents: Collection[str]) -> dict[str, str]:
    """The agents served over A2A (of the configured `agents`), each with its skill's
    description."""
    names = sorted(agents) if a2a is None or a2a.agents is None else list(a2a.agents)
    given = {} if a2a is None or a2a.agents is None else a2a.agents
    result: dict[str, str] = {}
    for name in names:
        result[name] = (given.get(name) or "").strip() or f"Habakkuk's agent {name}."
    return result
