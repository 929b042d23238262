"""The Mac's main display (spec 000 "Computer", backend macos).

screencapture -x takes the screen (silently, to a file); the pointer moves with
cliclick when it is installed, else with JavaScript for Automation posting Quartz mouse
events through osascript; keys and typing go through AppleScript's System Events, the
text and key passed as script arguments, never spliced into the script. Input is in
points, which on a Retina display are half the captured pixels: the size in points is
read with every capture.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .backend import Backend, BackendError, Button, Capture, Commands, Direction
from .geometry import Size
from .keys import MAC_CODES, MAC_MODIFIERS, KeyCombo
from .safety import FrontApp

_CLICLICK = {"left": "c", "right": "rc"}
_MULTI = {2: "dc", 3: "tc"}
# Every script reads its values from argv: what the model gave is never script text.
POINTS_SCRIPT = (
    "ObjC.import('AppKit'); var f = $.NSScreen.mainScreen.frame;"
    " Math.round(f.size.width) + 'x' + Math.round(f.size.height)"
)
MOUSE_SCRIPT = """ObjC.import('CoreGraphics');
function post(type, x, y, button, clicks) {
  var e = $.CGEventCreateMouseEvent(null, type, $.CGPointMake(x, y), button);
  $.CGEventSetIntegerValueField(e, $.kCGMouseEventClickState, clicks);
  $.CGEventPost($.kCGHIDEventTap, e);
}
function run(argv) {
  var kind = argv[0], x = Number(argv[1]), y = Number(argv[2]);
  var n = Number(argv[5] || 1), button = Number(argv[3] || 0);
  var downs = [$.kCGEventLeftMouseDown, $.kCGEventRightMouseDown, $.kCGEventOtherMouseDown];
  var ups = [$.kCGEventLeftMouseUp, $.kCGEventRightMouseUp, $.kCGEventOtherMouseUp];
  if (kind === 'move') { post($.kCGEventMouseMoved, x, y, 0, 0); return; }
  if (kind === 'click') {
    post($.kCGEventMouseMoved, x, y, 0, 0);
    for (var i = 1; i <= n; i++) {
      post(downs[button], x, y, button, i);
      post(ups[button], x, y, button, i);
    }
    return;
  }
  if (kind === 'drag') {
    var x2 = Number(argv[3]), y2 = Number(argv[4]);
    post($.kCGEventLeftMouseDown, x, y, 0, 1);
    post($.kCGEventLeftMouseDragged, x2, y2, 0, 1);
    post($.kCGEventLeftMouseUp, x2, y2, 0, 1);
    return;
  }
  if (kind === 'scroll') {
    post($.kCGEventMouseMoved, x, y, 0, 0);
    var dy = Number(argv[3]), dx = Number(argv[4]);
    var wheel = $.CGEventCreateScrollWheelEvent(null, $.kCGScrollEventUnitLine, 2, dy, dx);
    $.CGEventPost($.kCGHIDEventTap, wheel);
    return;
  }
  if (kind === 'down' || kind === 'up') {
    var at = $.CGEventGetLocation($.CGEventCreate(null));
    post(kind === 'down' ? $.kCGEventLeftMouseDown : $.kCGEventLeftMouseUp, at.x, at.y, 0, 1);
    return;
  }
  if (kind === 'where') {
    var p = $.CGEventGetLocation($.CGEventCreate(null));
    return Math.round(p.x) + ',' + Math.round(p.y);
  }
}"""
TYPE_SCRIPT = """on run argv
  tell application "System Events" to keystroke (item 1 of argv)
end run"""
FRONT_SCRIPT = (
    'tell application "System Events" to get name of first application process'
    " whose frontmost is true"
)
_JS_BUTTON = {"left": "0", "right": "1", "middle": "2"}
_JS_WHEEL = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}


def key_script(combo: KeyCombo) -> str:
    """The AppleScript pressing `combo`: the key (a code or a character) is argv's first
    item; the modifiers, from a fixed list, are the only words put into the script."""
    using = ", ".join(MAC_MODIFIERS[m] for m in combo.modifiers)
    press = (
        "key code (item 1 of argv as integer)"
        if combo.key in MAC_CODES
        else ("keystroke (item 1 of argv)")
    )
    suffix = f" using {{{using}}}" if using else ""
    return f'on run argv\n  tell application "System Events" to {press}{suffix}\nend run'


# System Events' names of the modifiers `key down` and `key up` take.
_HELD = {"ctrl": "control", "alt": "option", "shift": "shift", "super": "command"}


def hold_script(combo: KeyCombo, down: bool) -> str:
    """The AppleScript pressing (or releasing) `combo`'s keys and leaving them so: the
    modifiers are words from a fixed list; a character key is argv's first item. System
    Events holds no named key (Return, F1...): BackendError."""
    if combo.key in MAC_CODES:
        raise BackendError(f"macOS cannot hold {combo.key} down (only modifiers and characters)")
    verb = "key down" if down else "key up"
    lines = [f"    {verb} {_HELD[m]}" for m in combo.modifiers]
    if combo.key:
        lines.append(f"    {verb} (item 1 of argv)")
    if not down:
        lines.reverse()
    body = "\n".join(lines)
    return f'on run argv\n  tell application "System Events"\n{body}\n  end tell\nend run'


class MacBackend(Backend):
    """The main display of the Mac Habakkuk runs on."""

    name = "macos"

    def __init__(self, commands: Commands):
        super().__init__(commands)

    async def osascript(self, script: str, *args: str, javascript: bool = False) -> bytes:
        language = ["-l", "JavaScript"] if javascript else []
        return await self.commands.run(["osascript", *language, "-e", script, *args])

    async def capture(self) -> Capture:
        with tempfile.TemporaryDirectory(prefix="habakkuk-shot-") as folder:
            path = Path(folder) / "screen.png"
            await self.commands.run(["screencapture", "-x", "-t", "png", str(path)])
            try:
                image = path.read_bytes()
            except OSError:
                raise BackendError(
                    "screencapture wrote no image (allow Screen Recording for the terminal "
                    "in System Settings > Privacy & Security)"
                ) from None
        points = (await self.osascript(POINTS_SCRIPT, javascript=True)).decode().strip()
        width, _, height = points.partition("x")
        try:
            return Capture(image, Size(int(width), int(height)))
        except ValueError:
            raise BackendError(f"could not read the screen's size in points ({points!r})") from None

    async def _mouse(self, *args: str) -> bytes:
        return await self.osascript(MOUSE_SCRIPT, *args, javascript=True)

    async def click(self, x: int, y: int, button: Button, count: int) -> None:
        if self.commands.which("cliclick") and button in _CLICLICK:
            verb = _MULTI.get(count, _CLICLICK[button]) if button == "left" else _CLICLICK[button]
            repeat = 1 if button == "left" and count in _MULTI else count
            await self.commands.run(["cliclick", *[f"{verb}:{x},{y}"] * repeat])
            return
        await self._mouse("click", str(x), str(y), _JS_BUTTON[button], "0", str(count))

    async def move(self, x: int, y: int) -> None:
        if self.commands.which("cliclick"):
            await self.commands.run(["cliclick", f"m:{x},{y}"])
            return
        await self._mouse("move", str(x), str(y))

    async def drag(self, start: tuple[int, int], end: tuple[int, int]) -> None:
        if self.commands.which("cliclick"):
            await self.commands.run(["cliclick", f"dd:{start[0]},{start[1]}",
                                     f"m:{end[0]},{end[1]}", f"du:{end[0]},{end[1]}"])  # fmt: skip
            return
        await self._mouse("drag", str(start[0]), str(start[1]), str(end[0]), str(end[1]))

    async def scroll(self, x: int, y: int, direction: Direction, amount: int) -> None:
        dy, dx = _JS_WHEEL[direction]
        await self._mouse("scroll", str(x), str(y), str(dy * amount), str(dx * amount))

    async def type_text(self, text: str) -> None:
        await self.osascript(TYPE_SCRIPT, text)

    async def key(self, combo: KeyCombo) -> None:
        code = MAC_CODES.get(combo.key)
        await self.osascript(key_script(combo), str(code) if code is not None else combo.key)

    async def button(self, down: bool) -> None:
        if self.commands.which("cliclick"):
            await self.commands.run(["cliclick", f"{'dd' if down else 'du'}:."])  # "." : here
            return
        await self._mouse("down" if down else "up", "0", "0")

    async def hold(self, combo: KeyCombo, down: bool) -> None:
        await self.osascript(hold_script(combo, down), *([combo.key] if combo.key else []))

    async def pointer(self) -> tuple[int, int] | None:
        if self.commands.which("cliclick"):
            said = (await self.commands.run(["cliclick", "p"])).decode().strip()
        else:
            said = (await self._mouse("where", "0", "0")).decode().strip()
        x, _, y = said.rpartition(" ")[-1].partition(",")
        try:
            return int(float(x)), int(float(y))
        except ValueError:
            return None

    async def front(self) -> FrontApp | None:
        try:
            name = (await self.osascript(FRONT_SCRIPT)).decode("utf-8", "replace").strip()
        except BackendError:
            return None
        return FrontApp(name, "") if name else None

    async def open(self, app: str, args: list[str]) -> str:
        argv = ["open", "-a", app] + (["--args", *args] if args else [])
        await self.commands.run(argv)
        return f"{app} opened"
