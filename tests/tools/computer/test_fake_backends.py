"""The macOS and Wayland backends, which need a Mac or a Wayland session, tested through
fake commands on PATH that record their argument lists (and standard input) and answer
as the real ones do: what each action runs, argument by argument, with the model's text
and keys always passed as arguments or input, never inside a script."""

from __future__ import annotations

import io
import json
import stat
import sys
from pathlib import Path

import pytest
from PIL import Image

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.registry import CallResult, ToolRegistry
from habakkuk.tools.computer.backend import BackendError
from habakkuk.tools.computer.desk import Desktops, linux_backend
from habakkuk.tools.computer.tools import computer_tools, open_tool
from habakkuk.tools.computer.wayland import WaylandBackend
from habakkuk.tools.computer.x11 import X11Backend
from tests.helpers import tool_context

# One program for every fake command: it records its name, arguments and input, then
# answers as the real command would. Its settings are in fake.json beside it (the desktop
# commands get only a desktop's environment, so none can come from there).
FAKE = """#!{python}
import json, os, sys, struct, zlib
name = os.path.basename(sys.argv[0])
settings = json.load(open(os.path.join(os.path.dirname(sys.argv[0]), "fake.json")))
data = sys.stdin.read() if not sys.stdin.isatty() else ""
with open(settings["log"], "a") as log:
    log.write(json.dumps([name, *sys.argv[1:], data]) + "\\n")

def png(width, height):
    def chunk(kind, body):
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc
    rows = b"".join(b"\\0" + b"\\x80" * (width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\\x89PNG\\r\\n\\x1a\\n" + body

if name == "screencapture":
    open(sys.argv[-1], "wb").write(png(2880, 1800))  # a Retina screen's pixels
elif name == "grim":
    sys.stdout.buffer.write(png(1920, 1080))
elif name == "osascript":
    script = sys.argv[sys.argv.index("-e") + 1]
    if "NSScreen" in script:
        print("1440x900")  # its size in points
    elif "frontmost" in script:
        print(settings["front"])
elif name == "cliclick" and sys.argv[1:] == ["p"]:
    print("720,450")
"""


def fake_path(tmp_path: Path, names: list[str], front: str = "Finder") -> tuple[str, Path]:
    """A folder of fake commands (PATH) and the log they write; osascript says `front` is
    the app in front."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "calls.jsonl"
    (folder / "fake.json").write_text(json.dumps({"log": str(log), "front": front}))
    script = FAKE.format(python=sys.executable)
    for name in names:
        path = folder / name
        path.write_text(script)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(folder), log


def recorded(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


class Bench:
    def __init__(self, tmp_path: Path, backend: str, env: dict[str, str]):
        settings = ComputerConfig(backend=backend)  # type: ignore[arg-type]  # a literal
        self.desktops = Desktops(lambda agent: settings, environ=env)
        self.tools = ToolRegistry()
        for tool in [
            *computer_tools(self.desktops, lambda a: settings),
            open_tool(self.desktops, lambda a: settings),
        ]:
            self.tools.register(tool, "computer")
        self.ctx = tool_context(tmp_path)
        self.n = 0

    async def call(self, name: str, **args: object) -> CallResult:
        self.n += 1
        use = ToolUseBlock(f"c{self.n}", name, dict(args))
        return await self.tools.call_with_media(use, self.ctx, {name})


MAC_TOOLS = ["screencapture", "osascript", "cliclick", "open"]


async def test_macos_maps_a_retina_screenshot_to_points_and_clicks_with_cliclick(
    tmp_path: Path,
) -> None:
    path, log = fake_path(tmp_path, MAC_TOOLS)
    b = Bench(tmp_path, "macos", {"PATH": path})
    shot = await b.call("computer_screenshot")
    assert "1366x854 (captured at 2880x1800, scaled)" in shot.result.text
    with Image.open(io.BytesIO(Path(shot.media[0].blob).read_bytes())) as image:
        assert image.size == (1366, 854)
    calls = recorded(log)
    assert calls[0][:4] == ["screencapture", "-x", "-t", "png"]
    assert calls[1][:3] == ["osascript", "-l", "JavaScript"]

    start = len(calls)
    await b.call("computer_click", x=683, y=427, screenshot=False)  # the middle of the screen
    await b.call("computer_click", x=0, y=0, count=2, screenshot=False)
    await b.call("computer_click", x=1365, y=853, button="right", screenshot=False)
    await b.call("computer_drag", x=10, y=10, to_x=20, to_y=20, screenshot=False)
    assert recorded(log)[start:] == [
        ["cliclick", "c:720,450", ""],  # in points: the screen is 1440 x 900 of them
        ["cliclick", "dc:0,0", ""],
        ["cliclick", "rc:1439,899", ""],
        ["cliclick", "dd:11,11", "m:21,21", "du:21,21", ""],
    ]
    where = await b.call("computer_cursor")
    assert where.result.text == "The pointer is at (683, 427)."


async def test_macos_types_and_presses_keys_with_the_text_as_a_script_argument(
    tmp_path: Path,
) -> None:
    path, log = fake_path(tmp_path, MAC_TOOLS)
    b = Bench(tmp_path, "macos", {"PATH": path})
    hostile = 'end tell\ndo shell script "rm -rf ~"'
    await b.call("computer_type", text=hostile, screenshot=False)
    await b.call("computer_key", keys="cmd+shift+t", screenshot=False)
    await b.call("computer_key", keys="Return", screenshot=False)
    typed, combo, enter = recorded(log)[-3:]
    assert typed[:2] == ["osascript", "-e"] and typed[3:] == [hostile, ""]
    assert hostile not in typed[2] and "keystroke (item 1 of argv)" in typed[2]
    assert "using {shift down, command down}" in combo[2] and combo[3] == "t"
    assert "key code (item 1 of argv as integer)" in enter[2] and enter[3] == "36"


async def test_macos_without_cliclick_posts_quartz_events_through_jxa(tmp_path: Path) -> None:
    path, log = fake_path(tmp_path, ["screencapture", "osascript", "open"])
    b = Bench(tmp_path, "macos", {"PATH": path})
    await b.call("computer_click", x=683, y=427, count=2, screenshot=False)
    await b.call("computer_scroll", x=683, y=427, direction="down", amount=5, screenshot=False)
    click, scroll = recorded(log)[-2:]
    assert click[:3] == ["osascript", "-l", "JavaScript"]
    assert click[5:] == ["click", "720", "450", "0", "0", "2", ""]
    assert scroll[5:] == ["scroll", "720", "450", "-5", "0", ""]


async def test_macos_opens_apps_with_open_and_reads_the_front_app(tmp_path: Path) -> None:
    path, log = fake_path(tmp_path, MAC_TOOLS, front="1Password 8")
    env = {"PATH": path}
    b = Bench(tmp_path, "macos", env)
    opened = await b.call(
        "computer_open", app="Safari", args=["https://example.com"], screenshot=False
    )
    assert opened.result.text == "Safari opened."
    assert recorded(log)[-1] == ["open", "-a", "Safari", "--args", "https://example.com", ""]
    settings = ComputerConfig(backend="macos", confirm_apps=["1password"])
    desktops = Desktops(lambda agent: settings, environ=env)
    tool = computer_tools(desktops, lambda agent: settings)[1]  # computer_click
    why = await tool.confirm({"x": 1, "y": 1}, b.ctx)
    assert why is not None and "1Password 8" in why


async def test_wayland_captures_with_grim_and_drives_ydotool_by_input_codes(
    tmp_path: Path,
) -> None:
    path, log = fake_path(tmp_path, ["grim", "ydotool"])
    env = {"PATH": path, "WAYLAND_DISPLAY": "wayland-0",
           "XDG_SESSION_TYPE": "wayland", "DISPLAY": ":0"}  # fmt: skip
    b = Bench(tmp_path, "linux", env)
    shot = await b.call("computer_screenshot")
    assert "1366x768 (captured at 1920x1080, scaled)" in shot.result.text
    assert recorded(log)[0] == ["grim", "-t", "png", "-", ""]
    start = len(recorded(log))
    await b.call("computer_click", x=683, y=384, screenshot=False)
    await b.call("computer_type", text="héllo", screenshot=False)
    await b.call("computer_key", keys="ctrl+shift+t", screenshot=False)
    await b.call("computer_scroll", x=0, y=0, direction="down", amount=2, screenshot=False)
    assert recorded(log)[start:] == [
        ["ydotool", "mousemove", "--absolute", "-x", "960", "-y", "540", ""],
        ["ydotool", "click", "--repeat", "1", "--next-delay", "80", "0xC0", ""],
        ["ydotool", "type", "--file", "-", "héllo"],  # the text on standard input
        ["ydotool", "key", "29:1", "42:1", "20:1", "20:0", "42:0", "29:0", ""],
        ["ydotool", "mousemove", "--absolute", "-x", "0", "-y", "0", ""],
        ["ydotool", "mousemove", "--wheel", "-x", "0", "-y", "-2", ""],
    ]
    cursor = await b.call("computer_cursor")
    assert cursor.result.is_error and "cannot tell where the pointer is" in cursor.result.text


def test_the_linux_backend_follows_the_session_type() -> None:
    assert isinstance(linux_backend({"WAYLAND_DISPLAY": "wayland-0"}), WaylandBackend)
    both = {"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}
    assert isinstance(linux_backend(both), X11Backend)  # XWayland, not said to be Wayland
    assert isinstance(linux_backend({**both, "XDG_SESSION_TYPE": "wayland"}), WaylandBackend)
    assert isinstance(linux_backend({"DISPLAY": ":0"}), X11Backend)
    with pytest.raises(BackendError, match="no display"):
        linux_backend({})


async def test_a_missing_program_is_an_error_result_naming_the_package(tmp_path: Path) -> None:
    b = Bench(tmp_path, "linux", {"PATH": str(tmp_path), "WAYLAND_DISPLAY": "wayland-0"})
    done = await b.call("computer_screenshot")
    assert done.result.is_error and "grim is not installed (install grim)" in done.result.text
