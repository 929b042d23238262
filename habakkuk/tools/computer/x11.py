"""An X display through xdotool (spec 000 "Computer", backend linux and xvfb).

Each action is one chained xdotool command (`mousemove X Y click 1`: the server takes the
XTEST events in order; `--sync` would wait 16 s when the pointer is there already); typed
text goes on standard input (`type --file -`), so it never shows in the process list. The
screen is captured from the root window with ImageMagick's import, else scrot, else
ffmpeg's x11grab.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from .backend import Backend, BackendError, Button, Capture, Commands, Direction
from .keys import KeyCombo
from .safety import FrontApp

BUTTONS: dict[Button, str] = {"left": "1", "middle": "2", "right": "3"}
WHEEL: dict[Direction, str] = {"up": "4", "down": "5", "left": "6", "right": "7"}
TYPE_DELAY_MS = "8"  # between typed characters: fast, and no app drops a key
_WM_CLASS = re.compile(r'WM_CLASS\([^)]*\) = "([^"]*)"')


class X11Backend(Backend):
    """The display in the commands' DISPLAY (and XAUTHORITY)."""

    name = "x11"

    def __init__(self, commands: Commands, *, process_group: int | None = None):
        super().__init__(commands)
        # The desktop's process group (xvfb): apps opened on it end with it.
        self.process_group = process_group

    async def xdotool(self, *args: str, stdin: bytes | None = None) -> bytes:
        self.commands.need("xdotool", "xdotool")
        return await self.commands.run(["xdotool", *args], stdin=stdin)

    async def capture(self) -> Capture:
        display = self.commands.env.get("DISPLAY", "")
        if self.commands.which("import"):
            # BMP: no compression to spend time on (a PNG costs import twice as long).
            return Capture(await self.commands.run(["import", "-window", "root", "bmp:-"]))
        if self.commands.which("scrot"):
            return Capture(await self._scrot())
        if self.commands.which("ffmpeg"):
            width, height = await self.screen_size()
            argv = ["ffmpeg", "-loglevel", "error", "-f", "x11grab", "-video_size",
                    f"{width}x{height}", "-i", display, "-frames:v", "1", "-f", "image2pipe",
                    "-vcodec", "png", "-"]  # fmt: skip
            return Capture(await self.commands.run(argv))
        raise BackendError("no screen capture program: install imagemagick (or scrot, or ffmpeg)")

    async def _scrot(self) -> bytes:
        with tempfile.TemporaryDirectory(prefix="habakkuk-shot-") as folder:
            path = Path(folder) / "screen.png"
            await self.commands.run(["scrot", "--overwrite", str(path)])
            return path.read_bytes()

    async def screen_size(self) -> tuple[int, int]:
        """The display's size in pixels (xdotool getdisplaygeometry)."""
        words = (await self.xdotool("getdisplaygeometry")).split()
        try:
            return int(words[0]), int(words[1])
        except (IndexError, ValueError):
            raise BackendError(f"xdotool getdisplaygeometry said {words!r}") from None

    async def click(self, x: int, y: int, button: Button, count: int) -> None:
        await self.xdotool("mousemove", str(x), str(y), "click", "--repeat",
                           str(count), "--delay", "80", BUTTONS[button])  # fmt: skip

    async def move(self, x: int, y: int) -> None:
        await self.xdotool("mousemove", str(x), str(y))

    async def drag(self, start: tuple[int, int], end: tuple[int, int]) -> None:
        (x0, y0), (x1, y1) = start, end
        await self.xdotool("mousemove", str(x0), str(y0), "mousedown", "1",
                           "mousemove", str(x1), str(y1), "mouseup", "1")  # fmt: skip

    async def scroll(self, x: int, y: int, direction: Direction, amount: int) -> None:
        await self.xdotool("mousemove", str(x), str(y), "click", "--repeat",
                           str(amount), WHEEL[direction])  # fmt: skip

    async def type_text(self, text: str) -> None:
        await self.xdotool("type", "--delay", TYPE_DELAY_MS, "--file", "-",
                           stdin=text.encode("utf-8"))  # fmt: skip

    async def key(self, combo: KeyCombo) -> None:
        await self.xdotool("key", "--clearmodifiers", "--", combo.xdotool())

    async def button(self, down: bool) -> None:
        await self.xdotool("mousedown" if down else "mouseup", BUTTONS["left"])

    async def hold(self, combo: KeyCombo, down: bool) -> None:
        await self.xdotool("keydown" if down else "keyup", "--", combo.xdotool())

    async def pointer(self) -> tuple[int, int] | None:
        values = _shell_values(await self.xdotool("getmouselocation", "--shell"))
        try:
            return int(values["X"]), int(values["Y"])
        except (KeyError, ValueError):
            return None

    async def front(self) -> FrontApp | None:
        """The focused window's title and its program: the process's name when the window
        says its pid (_NET_WM_PID), else its class (WM_CLASS, read with xprop). None when
        no window has the focus, as on a bare Xvfb."""
        try:
            window = (await self.xdotool("getwindowfocus")).decode().strip()
            if not window.isdigit() or int(window) <= 1:  # None or PointerRoot
                return None
            title = (await self.xdotool("getwindowname", window)).decode("utf-8", "replace")
        except BackendError:
            return None
        front = FrontApp(await self._program(window), title.strip())
        return front if front.known else None

    async def _program(self, window: str) -> str:
        try:
            pid = (await self.xdotool("getwindowpid", window)).decode().strip()
            return Path(f"/proc/{int(pid)}/comm").read_text().strip()
        except (BackendError, ValueError, OSError):
            pass  # no _NET_WM_PID (or another machine's client): the class names it
        if not self.commands.which("xprop"):
            return ""
        try:
            said = await self.commands.run(["xprop", "-id", window, "WM_CLASS"])
        except BackendError:
            return ""
        match = _WM_CLASS.search(said.decode("utf-8", "replace"))
        return match.group(1) if match else ""

    async def open(self, app: str, args: list[str]) -> str:
        pid = await self.commands.spawn([app, *args], process_group=self.process_group)
        return f"{os.path.basename(app)} started (pid {pid}) on {self.commands.env['DISPLAY']}"


def _shell_values(output: bytes) -> dict[str, str]:
    """KEY=VALUE lines (xdotool --shell) as a dict."""
    values: dict[str, str] = {}
    for line in output.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values
