"""Where a process's log records go: habakkuk.log under the home, and the terminal's.

`install_logging` is called once the runtime opens (the app, `--serve`, `habakkuk run`,
`mcp serve`...): it gives the process's redactor the home's secret values and puts one
RotatingJsonHandler for habakkuk.log on the root logger (a second call for the same
home updates it; for another home, replaces it). With a handler on the root, Python's
last-resort handler no longer prints warnings into the terminal app.

`console_logging` is the terminal's share for the headless commands (`--serve` prints
warnings to stderr as before), redacted too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .home import read_env_file
from .logfile import RedactingFormatter, RotatingJsonHandler, log_path
from .logging_config import LoggingConfig
from .redact import REDACTOR, secret_values


def install_logging(
    root: Path, config: Any, env: Any, *, extra_values: Iterable[str] = ()
) -> RotatingJsonHandler:
    """Redact this home's secrets from now on and log to its habakkuk.log (`config.logging`).

    `env`: anything with `get(name)` (the home's Environment); `extra_values`: secrets
    found elsewhere (keys read from the OS keyring)."""
    values = secret_values(config, env, read_env_file(root / ".env"))
    REDACTOR.use_values([*values, *extra_values])
    settings: LoggingConfig = getattr(config, "logging", None) or LoggingConfig()
    path = log_path(root)
    logger = logging.getLogger()
    handler: RotatingJsonHandler | None = None
    root_level = logger.level
    for existing in list(logger.handlers):
        if isinstance(existing, RotatingJsonHandler):
            if existing.path == path and handler is None:
                handler = existing
            else:  # another home's, in this process (tests): this one's from now on
                logger.removeHandler(existing)
                existing.close()
                root_level = existing.root_level
    if handler is None:
        handler = RotatingJsonHandler(path, max_bytes=settings.max_bytes, backups=settings.backups)
        handler.root_level = root_level  # given back when the last user leaves
        logger.addHandler(handler)
    handler.users += 1
    handler.max_bytes, handler.backups = settings.max_bytes, settings.backups
    handler.setLevel(settings.level_number)
    if logger.level == logging.NOTSET or logger.level > settings.level_number:
        logger.setLevel(settings.level_number)
    return handler


def uninstall_logging(handler: RotatingJsonHandler | None) -> None:
    """One user of `handler` (a runtime that opened it) is done: the last one takes it off
    the root logger, closes the file and gives the root its level back (an in-process
    caller, a test, gets logging as it was)."""
    if handler is None:
        return
    handler.users -= 1
    logger = logging.getLogger()
    if handler.users > 0 or handler not in logger.handlers:
        return
    logger.removeHandler(handler)
    handler.close()
    logger.setLevel(handler.root_level)


class CurrentStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]  # TextIO
    """A StreamHandler writing to whatever `sys.stderr` is when a record comes, as Python's
    last-resort handler does: a process that swapped its stderr (a test's capture, a
    redirect) is never written through a stream closed since."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # read at each record, never kept
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # the stream is always the current sys.stderr


@contextmanager
def console_logging(
    level: int = logging.WARNING, fmt: str | None = None
) -> Iterator[logging.Handler]:
    """Records at `level` and above to stderr, redacted (the headless commands' terminal
    output), while the block runs. Its own level: the root may let INFO through for
    habakkuk.log. Taken off at the end, so an in-process caller (a test) keeps no handler
    writing to the terminal of a command that has ended."""
    logger = logging.getLogger()
    for existing in logger.handlers:
        if isinstance(existing, CurrentStderrHandler):  # set up already (nested, in-process)
            yield existing
            return
    handler = CurrentStderrHandler()
    handler.setLevel(level)
    handler.setFormatter(RedactingFormatter(fmt or "%(asctime)s %(levelname)s %(message)s"))
    root_level = logger.level
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(root_level)
