"""Readiness, part by part: what makes a store, the listener, a channel account, an MCP
server or a worker pool ready, and why not, as typed `Part`s.

Pure functions of what the control room read (no I/O), so /readyz
(habakkuk.server.readiness) and `habakkuk status` reading the databases alone
(habakkuk.cli.status) say the same thing the same way.

A channel is ready only while it is connected: "starting" (the platform has not
answered yet) is not, so a process is never ready before its chats work. A channel
connected in another process of the home (which holds its lease while this one stands
by) is ready here too, served by that holder. Reasons are fixed phrases with names and
counts: an error's text (a provider's body, an MCP server's stderr) never reaches them,
since /readyz answers without a token.
"""

from __future__ import annotations

import time

from habakkuk.engine.export import rfc3339
from habakkuk.engine.overview import ChannelHealth, HttpListener, McpState
from habakkuk.engine.pools import PoolState

from .health_types import Part

# Why a channel account in this state receives nothing now.
CHANNEL_REASONS = {
    "never started": "not started yet (no process of the home ran it)",
    "starting": "connecting: the platform has not answered yet",
    "backoff": "reconnecting after a failure",
    "fatal": "given up: it cannot start as configured (see `habakkuk channels`)",
    "silent": "no message or keepalive from the platform within its silent limit",
    "not running": "no live process of the home holds it",
    "stopped": "stopped",
    "standby": "waiting for the process that holds it",
}
MCP_REASONS = {
    "connecting": "connecting: the server has not answered yet",
    "down": "down: it failed to start or its connection broke (retrying)",
    "closed": "closed",
    "not started": "not started in this process",
}
POOL_REASONS = {
    "not started": "not started in this process",
    "draining": "draining: claims no new jobs (this process is stopping)",
    "stopped": "stopped",
    "down": "down: its dispatcher ended",
}


class Since:
    """When each part entered its current state, for parts whose source does not say:
    the first time this process saw it in that state."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[str, float]] = {}

    def of(self, kind: str, name: str, state: str) -> str:
        """RFC 3339 time `kind` `name` entered `state` (now, when it just did)."""
        key = (kind, name)
        seen = self._seen.get(key)
        if seen is None or seen[0] != state:
            seen = self._seen[key] = (state, time.time())
        return rfc3339(seen[1])


def holder_words(holder: str) -> str:
    """A lease holder as people read it: "pid 4242 on host" (from "host:pid:token")."""
    parts = holder.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        return f"pid {parts[1]} on {parts[0]}"
    return holder


def channel_part(health: ChannelHealth, here: str) -> Part:
    """A channel account: ready while connected, here or in the process holding it
    (`here`: this process's lease owner text)."""
    served_by = ""
    if health.holder:
        served_by = "here" if health.holder == here else holder_words(health.holder)
    since = rfc3339(health.since) if health.since is not None else None
    if health.state == "connected":
        return Part("channel", health.account, True, "connected", since, "", served_by)
    reason = CHANNEL_REASONS.get(health.state, health.state)
    if health.restarts and health.state in ("backoff", "silent", "starting"):
        reason += f" ({health.restarts} restart(s))"
    return Part("channel", health.account, False, health.state, since, reason, served_by)


def mcp_part(state: McpState, since: Since) -> Part:
    """An MCP server: ready while its link is up in this process."""
    when = since.of("mcp", state.name, state.state)
    if state.state == "up":
        return Part("mcp", state.name, True, "up", when)
    reason = MCP_REASONS.get(state.state, state.state)
    return Part("mcp", state.name, False, state.state, when, reason)


def pool_part(state: PoolState) -> Part:
    """A worker pool of this process: ready while it claims and runs jobs."""
    when = rfc3339(state.since)
    if state.state == "up":
        return Part("pool", state.name, True, "up", when)
    return Part("pool", state.name, False, state.state, when, POOL_REASONS.get(state.state, ""))


def no_pools_part(since: Since) -> Part:
    """This process runs no worker pool: nothing would run a turn queued here."""
    when = since.of("pool", "workers", "not started")
    return Part(
        "pool", "workers", False, "not started", when, "no worker pool runs in this process"
    )


def listener_part(http: HttpListener, since: Since) -> Part:
    """The HTTP listener: ready while a process of the home serves it."""
    when = since.of("listener", "http", http.state)
    if http.state == "serving":
        return Part("listener", "http", True, "serving", when, "", "here")
    holder = http.holder
    if http.state == "elsewhere" and holder:
        return Part("listener", "http", True, "serving", when, "", holder)
    reason = {
        "off": "no http: section in config.yaml",
        "stand-by": "its address is taken by another program; retrying",
        "elsewhere": "no process of the home serves it",
    }.get(http.state, http.state)
    return Part("listener", "http", False, http.state, when, reason)


def store_part(name: str, ok: bool, reason: str, since: Since) -> Part:
    """A store that answered a query (or did not, and why)."""
    state = "answers" if ok else "failing"
    return Part("store", name, ok, state, since.of("store", name, state), reason)
