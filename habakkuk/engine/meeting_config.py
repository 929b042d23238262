"""`meeting:`: the meetings toolset's settings (tools/meeting): how long to wait in a lobby
and alone, whether to greet the chat, the default and the cap on time in a call, and the
model that writes the notes. Each mistake is a ConfigError naming the file, line and key."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

MIN_DURATION = 60.0  # an attendance shorter than a minute cannot join and read anything


@dataclass
class MeetingConfig:
    """`meeting`: the attendance timings and the notes' model (spec 000 "Meetings")."""

    lobby_timeout: float | str = "15m"  # waiting to be admitted, then the attendance fails
    alone_timeout: float | str = "5m"  # nobody else in the call this long: leave
    announce: bool = True  # post "<name> has joined to take notes" in the meeting's chat
    duration_limit: float | str | None = None  # default time in a call; None: max_duration
    max_duration: float | str = "3h"  # the cap on any attendance, whatever meeting_join asks
    summary_model: str | None = None  # PROVIDER/MODEL for the notes; None: the agent's chain
    # Derived by resolve_meeting.
    lobby_seconds: float = field(default=15 * 60.0, init=False)
    alone_seconds: float = field(default=5 * 60.0, init=False)
    duration_seconds: float = field(default=3 * 3600.0, init=False)
    max_seconds: float = field(default=3 * 3600.0, init=False)


def resolve_meeting(
    meeting: MeetingConfig,
    path: Path,
    providers: Collection[str],
    provider_of: Callable[[str], str],
) -> None:
    """Check the section read from `path` (durations, a duration_limit within
    max_duration, a summary_model of a defined provider: `provider_of` reads a
    PROVIDER/MODEL or raises ValueError) and derive its seconds."""

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(meeting, key)}: meeting.{key}: {message}")

    def seconds(key: str, value: float | str) -> float:
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise fail(key, str(exc)) from None

    meeting.lobby_seconds = seconds("lobby_timeout", meeting.lobby_timeout)
    meeting.alone_seconds = seconds("alone_timeout", meeting.alone_timeout)
    meeting.max_seconds = seconds("max_duration", meeting.max_duration)
    if meeting.max_seconds < MIN_DURATION:
        raise fail("max_duration", "must be at least 1m")
    meeting.duration_seconds = meeting.max_seconds
    if meeting.duration_limit is not None:
        limit = seconds("duration_limit", meeting.duration_limit)
        if not MIN_DURATION <= limit <= meeting.max_seconds:
            raise fail("duration_limit", "must be between 1m and max_duration")
        meeting.duration_seconds = limit
    if meeting.summary_model is not None:
        try:
            provider = provider_of(meeting.summary_model)
        except ValueError as exc:
            raise fail("summary_model", str(exc)) from None
        if provider not in providers:
            known = ", ".join(sorted(providers)) or "none"
            raise fail(
                "summary_model", f"provider {provider!r} is not defined (providers: {known})"
            )
