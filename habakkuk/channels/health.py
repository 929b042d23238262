"""Truthful channel health: what an account did, recorded cheaply, read the same everywhere.

Writing. The process holding an account notes in memory (`ActivityLog`) each message the
gateway receives for it, each message a delivery sends through it and each send that
failed; the supervisor writes them to the account's channel_status row with its beat,
in one statement at most every `record_every` seconds (never one write per message).
Why an adapter stopped (a broken connection, silence past its limit, a rejected token)
is written at once with the state it leaves the account in.

The last error is history, not a state: it is kept, with its time, until a newer error
replaces it, and a success does not clear it. Whether the account works now is its
state; the error's age says whether it still matters ("last error 3d ago").

Reading (`channel_health`), in any process: an account is "connected" only while its
platform answered within its silent_limit; a recorded "connected" whose last beat is
older is "silent", and one no live process holds is "not running", whatever its row
says. `habakkuk channels` (text and --json), the overview, /api/overview and /status
all show what this returns.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.export import rfc3339
from habakkuk.engine.i18n import known, t
from habakkuk.engine.overview import NEVER_STARTED, ChannelHealth

from .store import Activity, ChannelStatus

NOT_RUNNING = "not running"
SILENT = "silent"
# Recorded states written while the lease is let go (nothing to hold).
_AT_REST = frozenset({"stopped"})


def record_every(config: ChannelConfig) -> float:
    """How often the holder writes an account's beat and activity down (seconds)."""
    return min(5.0, config.silent_limit_seconds / 4)


@dataclass
class _Noted:
    """One account's activity not yet written down."""

    last_in: float | None = None
    last_out: float | None = None
    error: str = ""
    error_at: float | None = None


class ActivityLog:
    """What each account of this process did since its supervisor last wrote it down.

    Noting costs no query: the gateway and the delivery worker call these on every
    message; the supervisor takes the notes with each beat it records."""

    def __init__(self) -> None:
        self._noted: dict[str, _Noted] = {}

    def _of(self, account: str) -> _Noted:
        return self._noted.setdefault(account, _Noted())

    def message_in(self, account: str) -> None:
        """The platform brought a message (or a button press) for `account`."""
        self._of(account).last_in = time.time()

    def message_out(self, account: str) -> None:
        """A message (a chunk, a file, a poll) went out through `account`."""
        self._of(account).last_out = time.time()

    def failed(self, account: str, error: str) -> None:
        """Something sent through `account` failed with `error` (one line)."""
        noted = self._of(account)
        noted.error = " ".join(error.split())
        noted.error_at = time.time()

    def take(self, account: str, *, beat: float | None = None) -> Activity | None:
        """The account's notes (with `beat`, when given) to write down, forgotten here;
        None when there is nothing new."""
        noted = self._noted.pop(account, None)
        if noted is None and beat is None:
            return None
        noted = noted or _Noted()
        return Activity(beat, noted.last_in, noted.last_out, noted.error, noted.error_at)


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.0f}d"


def ago(at: float | None, now: float) -> str:
    """How long ago `at` was ("12s", "5m", "3.0h", "4d"), "never" for None."""
    return "never" if at is None else f"{_ago(now - at)} ago"


def one_health(
    config: ChannelConfig, status: ChannelStatus | None, holder: str | None, now: float
) -> ChannelHealth:
    """One account's health from its recorded row and the live holder of its lease."""
    if status is None:
        return ChannelHealth(
            config.name, config.type, NEVER_STARTED, None, None, None, None, "", None, 0, "",
            "run habakkuk serve",
        )  # fmt: skip
    state, since, detail = status.state, status.since, status.detail
    if holder is None and state not in _AT_REST:
        # Its holder died or let go without writing so (kill -9, a lost machine).
        state, since = NOT_RUNNING, status.updated_at
        detail = f"last {status.state} {ago(status.updated_at, now)}"
    elif state == "connected":
        # A beat recorded before this connection (a previous run's) says nothing of it.
        heard = max(status.last_beat or 0.0, status.since)
        # The holder writes its beat down every record_every seconds: that much older is
        # not yet silence.
        if now - heard > config.silent_limit_seconds + record_every(config):
            state, since = SILENT, heard
            detail = f"no message or keepalive for {_ago(now - heard)}"
            detail += f" (limit {config.silent_limit_seconds:g}s)"
    return ChannelHealth(
        account=config.name,
        type=config.type,
        state=state,
        since=since,
        last_beat=status.last_beat,
        last_in=status.last_in,
        last_out=status.last_out,
        last_error=status.last_error,
        last_error_at=status.last_error_at,
        restarts=status.restarts,
        holder=holder or "",
        detail=detail,
    )


def channel_health(
    configs: Mapping[str, ChannelConfig],
    statuses: Mapping[str, ChannelStatus],
    holders: Mapping[str, str],
    now: float | None = None,
) -> list[ChannelHealth]:
    """Every configured account's health, by name."""
    at = time.time() if now is None else now
    return [
        one_health(config, statuses.get(name), holders.get(name), at)
        for name, config in sorted(configs.items())
    ]


def health_line(health: ChannelHealth, now: float) -> str:
    """The account's health in one line after its state: since when, last beat, in, out,
    restarts, holder, detail and last error (what `habakkuk channels` prints)."""
    if health.state == NEVER_STARTED:
        return health.detail
    parts = []
    if health.since is not None:
        parts.append(f"since {ago(health.since, now)}")
    parts.append(f"beat {ago(health.last_beat, now)}")
    parts.append(f"in {ago(health.last_in, now)}")
    parts.append(f"out {ago(health.last_out, now)}")
    if health.restarts:
        parts.append(f"{health.restarts} restart(s)")
    if health.holder:
        parts.append(f"held by {health.holder.rsplit(':', 1)[0]}")
    line = ", ".join(parts)
    if health.detail:
        line += f": {health.detail}"
    if health.last_error and health.last_error not in health.detail:
        # A backoff's detail already says the error it restarts after: not twice.
        line += f"; last error {ago(health.last_error_at, now)}: {health.last_error}"
    return line


def chat_line(health: ChannelHealth, now: float) -> str:
    """The account's health in the line /status shows in its chats (Markdown), in the
    chat's language (durations keep their s/m/h/d units)."""

    def said_ago(at: float | None) -> str:
        return t("chat.health.never") if at is None else t("chat.health.ago", time=_ago(now - at))

    state_key = "chat.health.state." + health.state.replace(" ", "_")
    since = "" if health.since is None else t("chat.health.since", ago=said_ago(health.since))
    error = ""
    if health.last_error:
        error = t("chat.health.error", ago=said_ago(health.last_error_at), error=health.last_error)
    return t(
        "chat.health.line",
        account=health.account,
        state=t(state_key) if known(state_key) else health.state,
        since=since,
        last_in=said_ago(health.last_in),
        last_out=said_ago(health.last_out),
        error=error,
    )


def health_json(health: ChannelHealth) -> dict[str, object]:
    """The account's health as `habakkuk channels --json` prints it (times RFC 3339)."""

    def when(at: float | None) -> str | None:
        return rfc3339(at) if at is not None else None

    return {
        "account": health.account,
        "type": health.type,
        "state": health.state,
        "healthy": health.healthy,
        "since": when(health.since),
        "last_beat": when(health.last_beat),
        "last_in": when(health.last_in),
        "last_out": when(health.last_out),
        "last_error": health.last_error,
        "last_error_at": when(health.last_error_at),
        "restarts": health.restarts,
        "holder": health.holder,
        "detail": health.detail,
    }
