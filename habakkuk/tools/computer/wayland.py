"""A Wayland session through grim and ydotool (spec 000 "Computer", backend linux).

grim captures every output to standard output; ydotool (its daemon, ydotoold, must be
running) moves the pointer to absolute coordinates, clicks, scrolls, types (text on
standard input) and presses keys by their Linux input codes. It cannot tell the
pointer's position nor name the window in front.
"""

from __future__ import annotations

import os

from .backend import Backend, Button, Capture, Commands, Direction
from .keys import KeyCombo, linux_codes

# ydotool click codes: the button (0 left, 1 right, 2 middle) with 0x40 down, 0x80 up.
_BUTTON = {"left": 0x00, "right": 0x01, "middle": 0x02}
_DOWN, _UP = 0x40, 0x80
_WHEEL = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}


class WaylandBackend(Backend):
    """The compositor of WAYLAND_DISPLAY."""

    name = "wayland"
    knows_pointer = False

    def __init__(self, commands: Commands):
        super().__init__(commands)

    async def ydotool(self, *args: str, stdin: bytes | None = None) -> None:
        self.commands.need("ydotool", "ydotool")
        await self.commands.run(["ydotool", *args], stdin=stdin)

    async def capture(self) -> Capture:
        self.commands.need("grim", "grim")
        return Capture(await self.commands.run(["grim", "-t", "png", "-"]))

    async def move(self, x: int, y: int) -> None:
        await self.ydotool("mousemove", "--absolute", "-x", str(x), "-y", str(y))

    async def click(self, x: int, y: int, button: Button, count: int) -> None:
        await self.move(x, y)
        code = _BUTTON[button] | _DOWN | _UP
        await self.ydotool("click", "--repeat", str(count), "--next-delay", "80", f"0x{code:02X}")

    async def drag(self, start: tuple[int, int], end: tuple[int, int]) -> None:
        await self.move(*start)
        await self.ydotool("click", f"0x{_BUTTON['left'] | _DOWN:02X}")
        await self.move(*end)
        await self.ydotool("click", f"0x{_BUTTON['left'] | _UP:02X}")

    async def scroll(self, x: int, y: int, direction: Direction, amount: int) -> None:
        await self.move(x, y)
        dx, dy = _WHEEL[direction]
        await self.ydotool("mousemove", "--wheel", "-x", str(dx * amount), "-y", str(dy * amount))

    async def type_text(self, text: str) -> None:
        await self.ydotool("type", "--file", "-", stdin=text.encode("utf-8"))

    async def key(self, combo: KeyCombo) -> None:
        codes = linux_codes(combo)
        presses = [f"{code}:1" for code in codes] + [f"{code}:0" for code in reversed(codes)]
        await self.ydotool("key", *presses)

    async def button(self, down: bool) -> None:
        await self.ydotool("click", f"0x{_BUTTON['left'] | (_DOWN if down else _UP):02X}")

    async def hold(self, combo: KeyCombo, down: bool) -> None:
        codes = linux_codes(combo)
        if down:
            await self.ydotool("key", *(f"{code}:1" for code in codes))
        else:
            await self.ydotool("key", *(f"{code}:0" for code in reversed(codes)))

    async def open(self, app: str, args: list[str]) -> str:
        pid = await self.commands.spawn([app, *args])
        where = self.commands.env.get("WAYLAND_DISPLAY", "wayland")
        return f"{os.path.basename(app)} started (pid {pid}) on {where}"
