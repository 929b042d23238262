"""Reading habakkuk.log back: across its rotated copies, filtered, and followed.

`read_log` gives the last records that pass a `LogFilter`, oldest first, reading the
newest file first and stopping once it has enough. `LogFollower` hands out each record
appended after it started, across rotations: when habakkuk.log is renamed under it, it
reads what is left of the old file, then the new one from its start. A line that is not
a record (cut, edited by hand, another program's) is counted in `bad`, never raised.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .logfile import log_path

LEVEL_NAMES: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
_ROTATED = re.compile(r"\.(\d+)$")


@dataclass(frozen=True)
class LogRecord:
    """One record of habakkuk.log."""

    time: float  # seconds since the epoch
    level: str  # DEBUG, INFO, WARNING, ERROR, CRITICAL
    logger: str
    message: str
    exc: str = ""  # a traceback, when the record carried one
    pid: int = 0

    @property
    def level_number(self) -> int:
        return LEVEL_NAMES.get(self.level.lower(), logging.INFO)


@dataclass(frozen=True)
class LogFilter:
    """Which records to show: at `level` or above, since `since` (epoch seconds), with
    `grep` in the logger, message or traceback (any case)."""

    level: int = logging.NOTSET
    since: float | None = None
    grep: str = ""

    def passes(self, record: LogRecord) -> bool:
        if record.level_number < self.level:
            return False
        if self.since is not None and record.time < self.since:
            return False
        if self.grep:
            needle = self.grep.lower()
            return (
                needle in record.message.lower()
                or needle in record.logger.lower()
                or needle in record.exc.lower()
            )
        return True


@dataclass
class LogRead:
    """Records read (oldest first) and the count of lines that were not records."""

    records: list[LogRecord] = field(default_factory=list)
    bad: int = 0


def level_number(name: str) -> int:
    """The logging level of debug, info, warn, warning, error or critical; ValueError."""
    try:
        return LEVEL_NAMES[name.strip().lower()]
    except KeyError:
        raise ValueError(name) from None


def parse_line(line: str | bytes) -> LogRecord | None:
    """The record of one line of habakkuk.log, or None when it is not one."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            return None
        stamp = data["time"]
        moment = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
        return LogRecord(
            time=moment,
            level=str(data.get("level", "INFO")),
            logger=str(data.get("logger", "")),
            message=str(data.get("msg", "")),
            exc=str(data.get("exc", "")),
            pid=int(data.get("pid") or 0),
        )
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def log_files(root: Path) -> list[Path]:
    """habakkuk.log and its rotated copies under the home `root`, oldest first."""
    path = log_path(root)
    rotated: list[tuple[int, Path]] = []
    if path.parent.is_dir():
        for entry in path.parent.glob(path.name + ".*"):
            match = _ROTATED.search(entry.name)
            if match and entry.name == f"{path.name}.{match.group(1)}" and entry.is_file():
                rotated.append((int(match.group(1)), entry))
    ordered = [p for _, p in sorted(rotated, reverse=True)]
    return [*ordered, path] if path.is_file() else ordered


def read_log(root: Path, wanted: LogFilter, limit: int | None = 100) -> LogRead:
    """The last `limit` records passing `wanted` (None: all), oldest first."""
    found = LogRead()
    newest_first: list[LogRecord] = []
    for path in reversed(log_files(root)):
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        older = False
        for line in reversed(lines):
            if not line.strip():
                continue
            record = parse_line(line)
            if record is None:
                found.bad += 1
                continue
            if wanted.since is not None and record.time < wanted.since:
                older = True  # the files before this one are older still
            if wanted.passes(record):
                newest_first.append(record)
                if limit is not None and len(newest_first) >= limit:
                    break
        if (limit is not None and len(newest_first) >= limit) or older:
            break
    found.records = newest_first[::-1]
    return found


class LogFollower:
    """The records appended to habakkuk.log after `start()`, across its rotations."""

    def __init__(self, root: Path, wanted: LogFilter):
        self.path = log_path(root)
        self.wanted = wanted
        self.bad = 0
        self._handle: int | None = None
        self._inode: tuple[int, int] | None = None
        self._partial = b""

    def start(self) -> None:
        """Follow from the file's current end."""
        self._open(at_end=True)

    def _open(self, *, at_end: bool) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._handle = self._inode = None
            return
        info = os.fstat(fd)
        if at_end:
            os.lseek(fd, 0, os.SEEK_END)
        self._handle, self._inode = fd, (info.st_dev, info.st_ino)
        self._partial = b""

    def _drain(self) -> list[LogRecord]:
        out: list[LogRecord] = []
        if self._handle is None:
            return out
        while True:
            chunk = os.read(self._handle, 1 << 16)
            if not chunk:
                break
            self._partial += chunk
        *lines, self._partial = self._partial.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            record = parse_line(line)
            if record is None:
                self.bad += 1
            elif self.wanted.passes(record):
                out.append(record)
        return out

    def poll(self) -> list[LogRecord]:
        """What was appended since the last poll (and, after a rotation, the new file's)."""
        if self._handle is None:
            self._open(at_end=False)  # the file appeared: all of it is new
            return self._drain()
        out = self._drain()
        try:
            info = os.stat(self.path)
            renamed = (info.st_dev, info.st_ino) != self._inode
        except FileNotFoundError:
            renamed = False  # between a rename and the next write: wait for it
        if renamed:
            out += self._drain()  # the rest of the old file, written before it moved
            out += self._skipped()  # copies rotated past since: whole, oldest first
            self.close()
            self._open(at_end=False)
            out += self._drain()
        return out

    def _skipped(self) -> list[LogRecord]:
        """The records of the rotated copies newer than the file being read (several
        rotations between two polls: habakkuk.log.2 was ours, .1 was never seen)."""
        rotated = [p for p in log_files(self.path.parent) if p != self.path]  # oldest first
        newer: list[Path] = []
        for path in reversed(rotated):  # newest first, until our own file
            try:
                info = os.stat(path)
            except FileNotFoundError:
                continue
            if (info.st_dev, info.st_ino) == self._inode:
                break
            newer.append(path)
        else:
            return []  # ours was dropped as the oldest copy, or is unknown: nothing to add
        out: list[LogRecord] = []
        for path in reversed(newer):
            try:
                lines = path.read_bytes().splitlines()
            except OSError:
                continue
            for line in lines:
                if line.strip():
                    record = parse_line(line)
                    if record is None:
                        self.bad += 1
                    elif self.wanted.passes(record):
                        out.append(record)
        return out

    def close(self) -> None:
        if self._handle is not None:
            os.close(self._handle)
        self._handle = self._inode = None


def parse_age(text: str) -> float:
    """Seconds of an age as --since takes it: 30s, 10m, 8h or 2d; ValueError otherwise."""
    from .durations import parse_duration

    value = text.strip().lower()
    if value.endswith("d") and value[:-1].replace(".", "", 1).isdigit():
        days = float(value[:-1])
        if days > 0:
            return days * 86400
    return parse_duration(value)


def since_seconds_ago(seconds: float) -> float:
    """The epoch time `seconds` ago (for --since 1h)."""
    return time.time() - seconds
