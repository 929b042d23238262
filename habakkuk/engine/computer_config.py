"""`agents.NAME.computer`: the agent's desktop (spec 000 "Computer").

backend: `xvfb` (a virtual display of the agent's own, the default), `linux` (the
user's X display through xdotool, or a Wayland session through grim and ydotool) or
`macos`. `display` is the first X display number xvfb tries (:99 up), `size` the
virtual screen; `max_actions` bounds the actions of one run of a turn; `confirm_apps`
names apps (process name or window title, matched without case) whose use always needs
a human. Each mistake is a ConfigError naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .errors import ConfigError

ComputerBackend = Literal["xvfb", "linux", "macos"]
_SIZE = re.compile(r"^([1-9][0-9]{2,4})x([1-9][0-9]{2,4})$")
MAX_SIDE = 8192  # what Xvfb accepts comfortably; larger screens cost memory for nothing


@dataclass
class ComputerConfig:
    """`agents.NAME.computer`: the agent's desktop and its limits."""

    backend: ComputerBackend = "xvfb"
    display: int = 99  # xvfb: the first display number tried
    size: str = "1280x800"  # xvfb: the virtual screen, WIDTHxHEIGHT
    max_actions: int = 150  # per run of a turn; waits and pointer queries are free
    confirm_apps: list[str] = field(default_factory=list)

    @property
    def screen(self) -> tuple[int, int]:
        """`size` as (width, height) (checked by `check_computer`)."""
        match = _SIZE.match(self.size)
        if match is None:
            raise ValueError(f"bad screen size {self.size!r}")
        return int(match.group(1)), int(match.group(2))


def check_computer(computer: ComputerConfig, path: Path, where: str) -> None:
    """Every setting in range (ConfigError naming the file, line and key)."""

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(computer, key)}: {where}.{key}: {message}")

    if not 0 <= computer.display <= 65535:
        raise fail("display", f"must be an X display number (0-65535), not {computer.display}")
    match = _SIZE.match(computer.size)
    if match is None or max(int(match.group(1)), int(match.group(2))) > MAX_SIDE:
        raise fail("size", f"must be WIDTHxHEIGHT within {MAX_SIDE} pixels, not {computer.size!r}")
    if computer.max_actions < 1:
        raise fail("max_actions", f"must be at least 1, not {computer.max_actions}")
    for index, app in enumerate(computer.confirm_apps):
        if not app.strip():
            raise fail("confirm_apps", f"entry {index} is empty")
