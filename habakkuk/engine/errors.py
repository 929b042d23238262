"""Error types that carry a one-line message meant for the user."""

from __future__ import annotations

from typing import Any, Self


class HabakkukError(Exception):
    """A user-facing error: its message is one line that names what and where.

    Made with `said(key, ...)`, it also carries its catalog key: `str(exc)` stays English
    (logs, a tool's result the model reads, whatever runs in no person's language), and
    `shown(exc)` says it in the language of the person it is shown to (a chat command's
    error, rendered where the chat's language is in use: conversation/commands.py)."""

    _key: tuple[str, int | None, dict[str, Any]] | None = None  # Any: t() takes them as **

    @classmethod
    def said(cls, key: str, /, *, count: int | None = None, **fields: object) -> Self:
        """The error whose message is catalog `key` with `fields` (`count`: a counted
        key's number), English in `str()`, any language in `shown`."""
        from habakkuk.engine.i18n import t

        error = cls(t(key, count=count, language="en", **fields))
        error._key = (key, count, fields)
        return error


class ConfigError(HabakkukError):
    """The config file or an environment setting is invalid."""


class BadInput(HabakkukError):
    """What was given cannot be taken as it is (a control character in a note's text):
    a mistake in what was asked, like bad usage, not a failure of what it did."""


class NotFound(HabakkukError):
    """A session, agent or job the user named does not exist."""


class LeaseLost(Exception):
    """The worker no longer owns the job's lease; it must stop without writing."""


def shown(exc: BaseException) -> str:
    """What an error says to the person it is shown to: a `said` error in the language in
    use (habakkuk.engine.i18n), any other as its message."""
    key = exc._key if isinstance(exc, HabakkukError) else None
    if key is None:
        return str(exc)
    from habakkuk.engine.i18n import t

    name, count, fields = key
    return t(name, count=count, **fields)


def first_line(exc: BaseException) -> str:
    """What an error says, on one line: its message's first line, else its type's name
    (a driver's error may carry a multi-line detail or no message at all)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
