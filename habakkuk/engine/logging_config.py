"""`logging:`: habakkuk.log's size, copies and level (spec 000 "Operations": Logs)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .errors import ConfigError

LogLevel = Literal["debug", "info", "warn", "warning", "error"]
LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
MAX_BACKUPS = 100


@dataclass
class LoggingConfig:
    """`logging`: habakkuk.log rotates past `max_mb` megabytes into `backups` copies
    (habakkuk.log.1 the newest); records below `level` are not written."""

    max_mb: float = 20
    backups: int = 5
    level: LogLevel = "info"

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 1024 * 1024)

    @property
    def level_number(self) -> int:
        return LEVELS[self.level]


def resolve_logging(section: LoggingConfig, path: Path) -> None:
    """ConfigError naming the line for a size or a count out of range."""
    if not section.max_mb > 0:
        raise ConfigError(f"{path}:{line_of(section, 'max_mb')}: logging.max_mb: must be > 0")
    if not 0 <= section.backups <= MAX_BACKUPS:
        raise ConfigError(
            f"{path}:{line_of(section, 'backups')}: logging.backups: "
            f"must be between 0 and {MAX_BACKUPS}"
        )
