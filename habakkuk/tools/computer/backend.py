"""What a desktop backend does, and the one way its commands run.

A backend drives a desktop through command-line tools (spec 000 "Computer": no native
bindings), each command an argument list, never a shell line, so every backend can be
tested without a display through fake commands on PATH that record their arguments.
Coordinates given to a backend are in its input space (geometry.py maps the model's).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from habakkuk.engine.timeouts import wait_within

from .geometry import Size
from .keys import KeyCombo
from .safety import FrontApp

Button = Literal["left", "right", "middle"]
Direction = Literal["up", "down", "left", "right"]
COMMAND_TIMEOUT = 30.0  # seconds for one backend command (a screenshot of a big screen)
STDERR_SHOWN = 300  # characters of a failed command's stderr in its error


class BackendError(Exception):
    """A desktop command failed or is missing; the message says which and why."""


@dataclass(frozen=True)
class Capture:
    """A screen capture: PNG (or any image Pillow reads) and the input space's size when
    it differs from the pixels (a Retina Mac's points; None: the same)."""

    image: bytes
    input_size: Size | None = None


class Commands:
    """Runs a backend's commands with its environment (DISPLAY, XAUTHORITY, PATH...)."""

    def __init__(self, env: Mapping[str, str], timeout: float = COMMAND_TIMEOUT):
        self.env = dict(env)
        self.timeout = timeout
        self._reaping: set[asyncio.Task[int]] = set()  # the waits of spawned programs

    def which(self, program: str) -> str | None:
        """The program's path on the backend's PATH, or None."""
        return shutil.which(program, path=self.env.get("PATH", os.defpath))

    def need(self, program: str, package: str) -> str:
        """The program's path; BackendError naming the package to install when missing."""
        found = self.which(program)
        if found is None:
            raise BackendError(f"{program} is not installed (install {package})")
        return found

    async def run(self, argv: list[str], stdin: bytes | None = None) -> bytes:
        """Run one command to its end: its standard output; BackendError when it fails."""
        program = self.which(argv[0]) or argv[0]
        try:
            process = await asyncio.create_subprocess_exec(
                program,
                *argv[1:],
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                start_new_session=True,  # a stuck command is killed whole, and ^C spares it
            )
        except FileNotFoundError:
            raise BackendError(f"{argv[0]} is not installed") from None
        try:
            out, err = await wait_within(process.communicate(stdin), self.timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            await process.wait()
            raise BackendError(f"{argv[0]} did not finish within {self.timeout:g} s") from None
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            raise
        if process.returncode != 0:
            said = " ".join(err.decode("utf-8", "replace").split())[:STDERR_SHOWN]
            raise BackendError(
                f"{argv[0]} {argv[1] if len(argv) > 1 else ''} failed (exit {process.returncode})"
                + (f": {said}" if said else "")
            )
        return out

    async def spawn(self, argv: list[str], *, process_group: int | None = None) -> int:
        """Start a program that keeps running (an app the agent opens): its pid. It runs in
        `process_group` when given (the desktop's, so it ends with it), else in a session
        of its own; its output goes nowhere."""
        program = self.which(argv[0])
        if program is None:
            raise BackendError(f"{argv[0]}: no such program on PATH")
        process = await asyncio.create_subprocess_exec(
            program,
            *argv[1:],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env=self.env,
            start_new_session=process_group is None,
            process_group=process_group,
        )
        # Reap it in the background, so it never lingers as a zombie of ours.
        waiting = asyncio.get_running_loop().create_task(process.wait())
        self._reaping.add(waiting)
        waiting.add_done_callback(self._reaping.discard)
        return process.pid


class Backend(ABC):
    """One kind of desktop: capture the screen, move and click, type, press keys."""

    name: str
    # Whether the backend can tell the pointer's position and the app in front.
    knows_pointer: bool = True

    def __init__(self, commands: Commands):
        self.commands = commands

    @abstractmethod
    async def capture(self) -> Capture:
        """The whole screen, as an image."""

    @abstractmethod
    async def click(self, x: int, y: int, button: Button, count: int) -> None:
        """Move to (x, y) and click `count` times (2: a double click)."""

    @abstractmethod
    async def move(self, x: int, y: int) -> None:
        """Move the pointer to (x, y)."""

    @abstractmethod
    async def drag(self, start: tuple[int, int], end: tuple[int, int]) -> None:
        """Press the left button at `start`, move to `end`, release it."""

    @abstractmethod
    async def scroll(self, x: int, y: int, direction: Direction, amount: int) -> None:
        """Scroll `amount` notches at (x, y)."""

    @abstractmethod
    async def type_text(self, text: str) -> None:
        """Type `text` as keystrokes into whatever has the focus."""

    @abstractmethod
    async def key(self, combo: KeyCombo) -> None:
        """Press a key with its modifiers (ctrl+l), then release them all."""

    @abstractmethod
    async def button(self, down: bool) -> None:
        """Press (down) or release the left button where the pointer is, and leave it so."""

    @abstractmethod
    async def hold(self, combo: KeyCombo, down: bool) -> None:
        """Press (down) or release the keys of `combo` (its key may be "": modifiers
        alone), and leave them so."""

    async def pointer(self) -> tuple[int, int] | None:
        """The pointer's position, or None when the backend cannot tell."""
        return None

    async def front(self) -> FrontApp | None:
        """The app in front (process name, window title), or None when it cannot be told."""
        return None

    @abstractmethod
    async def open(self, app: str, args: list[str]) -> str:
        """Start an app (with arguments): what was started, in a few words."""
