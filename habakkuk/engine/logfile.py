"""habakkuk.log: JSON lines through the standard `logging` module, redacted, rotated by size.

`JsonFormatter` makes one JSON object a line (time, level, logger, msg, pid, and exc
for a traceback), every text passed through the redactor (engine/redact.py) first.
`RotatingJsonHandler` appends those lines to the file so that several processes (the
app, `--serve`, a `habakkuk run`) can share it:

* the file is opened O_APPEND and each record is one os.write of a whole line, so lines
  from different processes never interleave inside each other;
* past `max_bytes` the writer takes habakkuk.log.lock (fcntl.flock), checks the size
  again (another writer may have rotated it already), shifts habakkuk.log.N up to
  `backups` and renames the file to habakkuk.log.1;
* before each write a writer compares the file's inode with the path's: one whose file
  was renamed under it (rotated by another process) reopens the path.

A line written by a writer that had not yet seen a rotation lands at the end of
habakkuk.log.1: in order, not lost. The standard library's RotatingFileHandler does none
of this across processes, which is why this handler exists; it is still a
logging.Handler, so every library's records reach it the usual way.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import logging
import os
import time
from pathlib import Path

from .redact import REDACTOR, Redactor

LOG_NAME = "habakkuk.log"
# Records' standard attributes: anything else on a record was given as `extra=`.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def log_path(root: Path) -> Path:
    """habakkuk.log under the home `root`."""
    return root / LOG_NAME


def rotated_paths(path: Path, backups: int) -> list[Path]:
    """The rotated copies, oldest first (habakkuk.log.N ... habakkuk.log.1)."""
    return [path.with_name(f"{path.name}.{n}") for n in range(backups, 0, -1)]


class JsonFormatter(logging.Formatter):
    """One redacted JSON object per record (no newline)."""

    def __init__(self, redactor: Redactor = REDACTOR):
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        redact = self.redactor.text
        data: dict[str, object] = {
            "time": _iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": redact(record.getMessage()),
            "pid": record.process,
        }
        if record.exc_info:
            data["exc"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            data["exc"] = redact(record.exc_text)
        if record.stack_info:
            data["stack"] = redact(self.formatStack(record.stack_info))
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                text = value if isinstance(value, (int, float, bool)) else redact(str(value))
                data.setdefault(key, text)
        return json.dumps(data, ensure_ascii=False, default=str)


class RedactingFormatter(logging.Formatter):
    """A plain text formatter (the terminal's) whose output is redacted."""

    def __init__(self, fmt: str | None = None, redactor: Redactor = REDACTOR):
        super().__init__(fmt)
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.text(super().format(record))


def _iso(created: float) -> str:
    seconds = int(created)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{int((created - seconds) * 1000):03d}Z"


class RotatingJsonHandler(logging.Handler):
    """Appends JSON lines to `path`, rotating it past `max_bytes` into `backups` copies;
    safe with several processes writing the same file (see the module's text)."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int, level: int = logging.INFO):
        super().__init__(level)
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.max_bytes = max_bytes
        self.backups = backups
        self.dropped = 0  # records that could not be written (a full disk, a gone folder)
        self.users = 0  # the runtimes of this process logging here (engine/logsetup.py)
        self.root_level = logging.WARNING  # the root logger's level before the first
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None
        self.setFormatter(JsonFormatter())

    # -- the file -----------------------------------------------------------------------

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        info = os.fstat(fd)
        self._fd, self._inode = fd, (info.st_dev, info.st_ino)
        return fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = self._inode = None

    def _current(self) -> int:
        """Our descriptor, reopened when the path is no longer our file (rotated)."""
        if self._fd is None:
            return self._open()
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._close_fd()
            return self._open()
        if (info.st_dev, info.st_ino) != self._inode:
            self._close_fd()
            return self._open()
        return self._fd

    def _rotate_if_needed(self, incoming: int) -> None:
        """Rotate under the lock file, after checking the size again under it."""
        lock = os.open(self.lock_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                size = 0
            if size and size + incoming > self.max_bytes:
                self._shift()
        finally:
            os.close(lock)  # closing releases the lock
        self._close_fd()

    def _shift(self) -> None:
        if self.backups <= 0:
            os.unlink(self.path)
            return
        copies = [self.path, *reversed(rotated_paths(self.path, self.backups))]
        for older, newer in reversed(list(itertools.pairwise(copies))):
            with contextlib.suppress(FileNotFoundError):
                os.replace(older, newer)

    # -- logging.Handler ------------------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode("utf-8", "replace")
            fd = self._current()
            if os.fstat(fd).st_size + len(data) > self.max_bytes:
                self._rotate_if_needed(len(data))
                fd = self._current()
            view = memoryview(data)
            while view:  # one write on a regular file; a partial one is finished
                view = view[os.write(fd, view) :]
        except RecursionError:
            raise
        except Exception:
            # Never a traceback into the terminal or a failed turn for a log line.
            self.dropped += 1
            self._close_fd()

    def close(self) -> None:
        self.acquire()
        try:
            self._close_fd()
        finally:
            self.release()
        super().close()
