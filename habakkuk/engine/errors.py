"""Error types that carry a one-line message meant for the user."""

from __future__ import annotations


class HabakkukError(Exception):
    """A user-facing error: its message is one line that names what and where."""


class ConfigError(HabakkukError):
    """The config file or an environment setting is invalid."""


class BadInput(HabakkukError):
    """What was given cannot be taken as it is (a control character in a note's text):
    a mistake in what was asked, like bad usage, not a failure of what it did."""


class NotFound(HabakkukError):
    """A session, agent or job the user named does not exist."""


class LeaseLost(Exception):
    """The worker no longer owns the job's lease; it must stop without writing."""


def first_line(exc: BaseException) -> str:
    """What an error says, on one line: its message's first line, else its type's name
    (a driver's error may carry a multi-line detail or no message at all)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
