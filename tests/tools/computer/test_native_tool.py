"""The native computer tool (Anthropic's `computer`, its calls as the models send them)
on a real Xvfb with xev: each action lands where the same computer_* call would, the
ones no function tool has (a click where the pointer is, held buttons and keys, repeated
keys, modifiers held through a click) reach the program, and the function tools' safety
rules hold for it: the typing guard, max_actions shared with them, the sandbox refusal,
confirm_apps and read-only mode."""

from __future__ import annotations

from pathlib import Path

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.llm.types import ImageBlock, NativeComputer, ToolUseBlock
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.tools.computer.desk import Desktops
from habakkuk.tools.computer.native import NativeComputerTool
from tests.helpers import eventually, tool_context

from .test_xvfb_desktop import Human
from .xdesk import bench, needs_x

pytestmark = needs_x
BIG = ComputerConfig(size="1600x1000")  # shown to the model at 1366x854


async def test_a_native_click_lands_where_computer_click_would_and_shows_its_screenshot(
    tmp_path: Path,
) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        xev = await b.xev("600x400+100+100")
        shot = await b.call("computer", action="screenshot")
        assert not shot.result.is_error and "1366x854" in shot.result.text
        clicked = await b.call("computer", action="left_click", coordinate=[300, 250])
        assert not clicked.result.is_error, clicked.result.text
        # (300, 250) of the 1366x854 image is (351, 293) on the 1600x1000 screen, as for
        # computer_click (test_xvfb_desktop).
        await eventually(lambda: xev.presses() == [(351, 293)], what=f"the click: {xev.text()}")
        [image] = clicked.media
        assert isinstance(image, ImageBlock) and image.tool_use_id == f"call_{b.calls}"
        assert b.ctx.taint.tainted


async def test_actions_without_a_function_tool_reach_the_program(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        xev = await b.xev("600x400+100+100")
        await b.call("computer", action="mouse_move", coordinate=[300, 250])
        # A click with no coordinate is where the pointer is; so are the held button's.
        assert not (await b.call("computer", action="right_click")).result.is_error
        assert not (await b.call("computer", action="left_mouse_down")).result.is_error
        assert not (await b.call("computer", action="left_mouse_up")).result.is_error
        assert not (await b.call("computer", action="triple_click")).result.is_error
        await eventually(
            lambda: xev.buttons() == [3, 1, 1, 1, 1], what=f"the buttons: {xev.buttons()}"
        )
        assert set(xev.presses()) == {(351, 293)}
        pressed = await b.call("computer", action="key", text="a", repeat=3)
        assert not pressed.result.is_error, pressed.result.text
        held = await b.call("computer", action="hold_key", text="shift", duration=0.1)
        assert not held.result.is_error, held.result.text
        shifted = await b.call("computer", action="left_click", coordinate=[300, 250], text="ctrl")
        assert not shifted.result.is_error, shifted.result.text
        await eventually(
            lambda: xev.keysyms() == ["a", "a", "a", "Shift_L", "Control_L"],
            what=f"the keys: {xev.keysyms()}",
        )
        scrolled = await b.call(
            "computer", action="scroll", scroll_direction="down", scroll_amount=2
        )
        assert not scrolled.result.is_error, scrolled.result.text
        await eventually(lambda: xev.buttons()[-2:] == [5, 5], what=f"wheel: {xev.buttons()}")
        zoomed = await b.call("computer", action="zoom", region=[0, 0, 683, 427])
        assert not zoomed.result.is_error and len(zoomed.media) == 1
        waited = await b.call("computer", action="wait", duration=0.01)
        assert not waited.result.is_error and len(waited.media) == 1
        where = await b.call("computer", action="cursor_position")
        assert "(300, 250)" in where.result.text


async def test_a_bad_native_call_is_an_error_the_model_reads(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        drag = await b.call("computer", action="left_click_drag", coordinate=[5, 5])
        assert drag.result.is_error and "start_coordinate" in drag.result.text
        outside = await b.call("computer", action="left_click", coordinate=[1400, 5])
        assert outside.result.is_error and "outside the screenshot" in outside.result.text
        assert outside.result.text.startswith("computer:")
        key = await b.call("computer", action="key", text="hyper+q")
        assert key.result.is_error
        unknown = await b.call("computer", action="paint")
        assert unknown.result.is_error


async def test_the_typing_guard_and_max_actions_hold_for_the_native_tool(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), ComputerConfig(max_actions=2)) as b:
        card = await b.call("computer", action="type", text="4111 1111 1111 1111")
        assert card.result.is_error and "card number" in card.result.text
        assert b.desktops.started("main") is None  # refused before any desktop started
        assert not (
            await b.call("computer", action="mouse_move", coordinate=[1, 1])
        ).result.is_error
        assert not (await b.call("computer_move", x=2, y=2, screenshot=False)).result.is_error
        assert not (await b.call("computer", action="cursor_position")).result.is_error
        third = await b.call("computer", action="left_click", coordinate=[3, 3])
        assert third.result.is_error and "its 2 computer actions" in third.result.text
        another = await b.call("computer", action="left_mouse_down")
        assert another.result.is_error and "its 2 computer actions" in another.result.text


async def test_confirm_apps_and_read_only_mode_hold_for_the_native_tool(tmp_path: Path) -> None:
    human = Human("deny")
    settings = ComputerConfig(confirm_apps=["event tester"])
    async with bench(tool_context(tmp_path, mode="full", approver=human), settings) as b:
        await b.xev("600x400+100+100")
        b.xdotool("search", "--name", "Event Tester", "windowfocus", "--sync")
        denied = await b.call("computer", action="double_click", coordinate=[300, 250])
        assert denied.result.is_error and "denied by terminal" in denied.result.text
        assert [r.tool for r in human.asked] == ["computer"]
        assert "event tester" in human.asked[0].summary.lower()
    async with bench(tool_context(tmp_path, mode="read-only"), ComputerConfig()) as b:
        shot = await b.call("computer", action="screenshot")
        assert shot.result.is_error and "not allowed in read-only mode" in shot.result.text
        assert not (await b.call("computer", action="wait", duration=0.01)).result.is_error


async def test_a_sandboxed_agent_is_refused_the_native_tool_and_declares_no_desktop(
    tmp_path: Path,
) -> None:
    settings = ComputerConfig(backend="linux")
    tool = NativeComputerTool(Desktops(lambda agent: settings), lambda agent: settings,
                              lambda agent: "docker")  # fmt: skip
    registry = ToolRegistry()
    registry.register_native(tool)
    use = ToolUseBlock("call_1", "computer", {"action": "screenshot"})
    result = await registry.call(use, tool_context(tmp_path), {"computer"})
    assert result.is_error and "docker sandbox" in result.text
    assert await tool.declared(tmp_path, "main") is None
    assert tool.desktops.started("main") is None


async def test_the_declared_display_is_the_scaled_screen_then_the_desk_s(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        native = b.tools.native("computer")
        assert native is not None
        assert await native.declared(tmp_path, "main") == NativeComputer(1366, 854, None)
        assert b.desktops.started("main") is None  # declaring starts no desktop
        desk = await b.desk()
        assert desk.xvfb is not None
        number = desk.xvfb.state.display
        assert await native.declared(tmp_path, "main") == NativeComputer(1366, 854, number)


async def test_a_drag_with_keys_held_starts_where_the_model_pointed(tmp_path: Path) -> None:
    async with bench(tool_context(tmp_path), BIG) as b:
        xev = await b.xev("600x400+100+100")
        # Over xev first: with no window manager, the keys go to the window under the pointer.
        await b.call("computer", action="mouse_move", coordinate=[250, 200])
        dragged = await b.call("computer", action="left_click_drag", start_coordinate=[300, 250],
                               coordinate=[400, 300], text="shift")  # fmt: skip
        assert not dragged.result.is_error, dragged.result.text
        assert "Dragged from (300, 250) to (400, 300) holding shift." in dragged.result.text
        await eventually(
            lambda: xev.presses() == [(351, 293)] and xev.keysyms() == ["Shift_L"],
            what="the drag with shift held",
        )
