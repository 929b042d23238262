"""The native computer tool's own actions on the macOS and Wayland backends, through the
fake commands of test_fake_backends (argument lists recorded): the held button and keys,
and the display a user's session is declared with (a first capture's scaled size; no
display at all keeps the function tools)."""

from __future__ import annotations

from pathlib import Path

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.llm.types import NativeComputer, ToolUseBlock
from habakkuk.engine.toolkit.registry import CallResult, ToolRegistry
from habakkuk.tools.computer.desk import Desktops
from habakkuk.tools.computer.native import NativeComputerTool
from tests.helpers import tool_context

from .test_fake_backends import MAC_TOOLS, fake_path, recorded

WAYLAND = {"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}


class Native:
    def __init__(self, tmp_path: Path, backend: str, env: dict[str, str]):
        settings = ComputerConfig(backend=backend)  # type: ignore[arg-type]  # a literal
        self.tool = NativeComputerTool(Desktops(lambda agent: settings, environ=env),
                                       lambda agent: settings)  # fmt: skip
        self.registry = ToolRegistry()
        self.registry.register_native(self.tool)
        self.ctx = tool_context(tmp_path)
        self.n = 0

    async def call(self, **args: object) -> CallResult:
        self.n += 1
        use = ToolUseBlock(f"c{self.n}", "computer", dict(args))
        done = await self.registry.call_with_media(use, self.ctx, {"computer"})
        assert not done.result.is_error, done.result.text
        return done


async def test_wayland_holds_the_button_and_keys_by_input_codes(tmp_path: Path) -> None:
    path, log = fake_path(tmp_path, ["grim", "ydotool"])
    b = Native(tmp_path, "linux", {"PATH": path, **WAYLAND})
    assert await b.tool.declared(tmp_path, "main") == NativeComputer(1366, 768, None)
    start = len(recorded(log))
    await b.call(action="left_mouse_down", coordinate=[683, 384])
    await b.call(action="left_mouse_up", coordinate=[683, 384])
    await b.call(action="hold_key", text="ctrl+shift", duration=0)
    commands = [call for call in recorded(log)[start:] if call[0] == "ydotool"]
    assert commands == [
        ["ydotool", "mousemove", "--absolute", "-x", "960", "-y", "540", ""],
        ["ydotool", "click", "0x40", ""],
        ["ydotool", "mousemove", "--absolute", "-x", "960", "-y", "540", ""],
        ["ydotool", "click", "0x80", ""],
        ["ydotool", "key", "29:1", "42:1", ""],
        ["ydotool", "key", "42:0", "29:0", ""],
    ]


async def test_macos_holds_modifiers_and_the_button_where_the_pointer_is(tmp_path: Path) -> None:
    path, log = fake_path(tmp_path, MAC_TOOLS)
    b = Native(tmp_path, "macos", {"PATH": path})
    start = len(recorded(log))
    await b.call(action="left_mouse_down")
    await b.call(action="left_mouse_up")
    await b.call(action="left_click", coordinate=[683, 427], text="cmd")
    calls = [call for call in recorded(log)[start:] if call[0] in ("cliclick", "osascript")]
    clicks = [call for call in calls if call[0] == "cliclick" and call[1] != "p"]
    assert clicks == [["cliclick", "dd:.", ""], ["cliclick", "du:.", ""],
                      ["cliclick", "c:720,450", ""]]  # fmt: skip
    held = [call[2] for call in calls if call[0] == "osascript" and "key " in call[2]]
    assert len(held) == 2
    assert "key down command" in held[0] and "key up command" in held[1]


async def test_a_session_without_a_display_declares_nothing(tmp_path: Path) -> None:
    b = Native(tmp_path, "linux", {"PATH": str(tmp_path)})
    assert await b.tool.declared(tmp_path, "main") is None  # the function tools stay


def test_an_editor_session_sees_the_home_s_native_tool(tmp_path: Path) -> None:
    from habakkuk.protocols.acp.editor_tools import EditorRegistry

    b = Native(tmp_path, "linux", {"PATH": str(tmp_path)})
    b.registry.register(b.tool.tools["computer_click"], "computer")
    editor = EditorRegistry(b.registry, None)  # type: ignore[arg-type]  # files never touched here
    assert editor.native("computer") is b.tool
    assert editor.toolset("computer") == ["computer_click"]
    assert editor.get("computer") is b.tool
