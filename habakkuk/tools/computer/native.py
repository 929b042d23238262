"""The native computer tool: Anthropic's `computer` executed by our computer tools
(spec 000 "Computer", Native tool; llm/computer_use.py decides when it is offered).

A call is `{"action": ..., ...}` as the model's tool version spells it. Each action is
routed to the computer_* tool that does the same thing, with its arguments translated
(`coordinate` [x, y] to x and y, `scroll_direction` to direction...), and that tool's
own refusal, confirmation, risk, taint and run decide and do it: the credential and
card-number guard on typed text, confirm_apps, max_actions, the sandbox refusal and
exec risk apply exactly as to the function tools. What no function tool does (a click
where the pointer is, a click or scroll with keys held, the left button held or
released, a key held for a while, a key pressed several times) is done here on the
same desk, through the same run (counted, locked, its errors the model's to read).
Coordinates are in the latest screenshot, mapped as the function tools map theirs, and
every screenshot the call attaches carries the call's id, so the adapter can put it
inside the call's result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.llm.types import NativeComputer
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import NativeTool, ToolContext, ToolError, ToolOutput

from .backend import BackendError, Button
from .desk import Desk, Desktops
from .geometry import Size, shown_size
from .keys import BadKey, parse_combo, parse_held
from .tools import MAX_WAIT_SECONDS, ComputerTool, computer_tools

CLICKS: dict[str, tuple[Button, int]] = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}
ACTIONS = (
    "screenshot", *CLICKS, "mouse_move", "left_click_drag", "left_mouse_down", "left_mouse_up",
    "scroll", "type", "key", "hold_key", "cursor_position", "wait", "zoom",
)  # fmt: skip
_POINT = {
    "type": "array",
    "items": {"type": "integer", "minimum": 0},
    "minItems": 2,
    "maxItems": 2,
    "description": "(x, y) in the latest screenshot's pixels",
}
_DISPLAY = re.compile(r":(\d+)(?:\.\d+)?$")


class Routed:
    """A call routed: the tool that does it and its arguments (the native tool itself for
    an action no function tool does)."""

    def __init__(self, tool: ComputerTool, args: dict[str, Any]):
        self.tool = tool
        self.args = args


class NativeComputerTool(ComputerTool, NativeTool):
    """`computer`: every action of Anthropic's computer tool versions."""

    name = "computer"
    replaces: ClassVar[str] = "computer"
    description = (
        "Use the agent's desktop: `action` is one of " + ", ".join(ACTIONS) + "; "
        "coordinates are [x, y] in the latest screenshot. Answers with a screenshot."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "coordinate": _POINT,
            "start_coordinate": _POINT,
            "text": {"type": "string", "minLength": 1, "maxLength": 10000},
            "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
            "scroll_amount": {"type": "integer", "minimum": 1, "maximum": 30},
            "duration": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
            "repeat": {"type": "integer", "minimum": 1, "maximum": 100},
            "region": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0},
                "minItems": 4,
                "maxItems": 4,
            },
        },
        "required": ["action"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        desktops: Desktops,
        settings: Callable[[str], ComputerConfig],
        sandbox: Callable[[str], str] | None = None,
    ):
        super().__init__(desktops, settings, sandbox)
        self.tools = {tool.name: tool for tool in computer_tools(desktops, settings, self.sandbox)}

    # -- what the request declares ---------------------------------------------------

    async def declared(self, home: Path, agent: str) -> NativeComputer | None:
        """The display of `agent`'s desk: the latest screenshot's size once there is one;
        before, xvfb's screen scaled as its screenshots will be, or a first capture of the
        user's display (None when it cannot be taken: the function tools stay)."""
        desk = self.desktops.started(agent)
        if desk is not None and desk.geometry is not None:
            shown = desk.geometry.shown  # read without the lock: an action may hold it
            return NativeComputer(shown.width, shown.height, _display(desk))
        if self.settings(agent).backend == "xvfb":
            screen = shown_size(Size(*self.settings(agent).screen))
            return NativeComputer(screen.width, screen.height, _display(desk))
        if self.sandbox(agent) != "none":
            return None  # refused anyway: no desktop of the user's is touched for it
        try:
            desk = desk or await self.desktops.desk(home, agent)
            async with desk.lock:
                geometry = await desk.known_geometry()
        except BackendError:
            return None
        return NativeComputer(geometry.shown.width, geometry.shown.height, _display(desk))

    # -- routing -----------------------------------------------------------------------

    def route(self, args: dict[str, Any]) -> Routed:
        """The tool that does the call's action, and its arguments (ValueError naming
        what is missing or wrong)."""
        action = str(args.get("action", ""))
        at = _point(args.get("coordinate"))
        if action == "screenshot":
            return Routed(self.tools["computer_screenshot"], {})
        if action in CLICKS and at is not None and not args.get("text"):
            button, count = CLICKS[action]
            click = {"x": at[0], "y": at[1], "button": button, "count": count}
            return Routed(self.tools["computer_click"], click)
        if action == "mouse_move":
            x, y = _needed(at, "coordinate", action)
            return Routed(self.tools["computer_move"], {"x": x, "y": y})
        if action == "left_click_drag":
            x, y = _needed(_point(args.get("start_coordinate")), "start_coordinate", action)
            to_x, to_y = _needed(at, "coordinate", action)
            if args.get("text"):
                return Routed(self, args)  # keys held through it: see act
            drag = {"x": x, "y": y, "to_x": to_x, "to_y": to_y}
            return Routed(self.tools["computer_drag"], drag)
        if action == "scroll" and "scroll_direction" not in args:
            raise ValueError("scroll needs scroll_direction")
        if action == "scroll" and at is not None and not args.get("text"):
            scroll = {"x": at[0], "y": at[1], "direction": args["scroll_direction"],
                      "amount": int(args.get("scroll_amount", 3))}  # fmt: skip
            return Routed(self.tools["computer_scroll"], scroll)
        if action in ("type", "key", "hold_key") and not args.get("text"):
            raise ValueError(f"{action} needs text")
        if action == "type":
            return Routed(self.tools["computer_type"], {"text": str(args["text"])})
        if action == "key" and int(args.get("repeat", 1)) == 1:
            return Routed(self.tools["computer_key"], {"keys": str(args["text"])})
        if action == "cursor_position":
            return Routed(self.tools["computer_cursor"], {})
        if action == "wait":
            seconds = float(args.get("duration", 0))
            if seconds <= 0:
                raise ValueError("wait needs a duration above 0 seconds")
            return Routed(self.tools["computer_wait"], {"seconds": seconds, "screenshot": True})
        if action == "zoom":
            region = args.get("region")
            if not isinstance(region, list) or len(region) != 4:
                raise ValueError("zoom needs region [x0, y0, x1, y1]")
            x0, y0, x1, y1 = (int(v) for v in region)
            return Routed(self.tools["computer_zoom"], {"x0": x0, "y0": y0, "x1": x1, "y1": y1})
        if action == "hold_key" and "duration" not in args:
            raise ValueError("hold_key needs duration")
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        return Routed(self, args)  # done here: see act

    def refuse_input(self, args: dict[str, Any]) -> str | None:
        try:
            routed = self.route(args)
            holds = (*CLICKS, "scroll", "left_click_drag")
            held = args.get("text") if args.get("action") in holds else None
            if held:
                parse_held(str(held))
            if args.get("action") == "hold_key":
                parse_held(str(args["text"]))
            if args.get("action") == "key":
                parse_combo(str(args["text"]))
        except (ValueError, BadKey) as exc:
            return f"{self.name}: {exc}"
        return None if routed.tool is self else routed.tool.refuse_input(routed.args)

    def refuse(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        routed = self.route(args)
        if routed.tool is self:
            return super().refuse(args, ctx)
        return routed.tool.refuse(routed.args, ctx)

    async def confirm(self, args: dict[str, Any], ctx: ToolContext) -> str:
        routed = self.route(args)
        if routed.tool is self:
            return await super().confirm(args, ctx)
        return await routed.tool.confirm(routed.args, ctx)

    def risk_for(self, args: dict[str, Any], ctx: ToolContext) -> Risk:
        routed = self._routed(args)
        return routed.tool.risk if routed is not None else Risk.EXEC

    def taints_turn(self, args: dict[str, Any], ctx: ToolContext) -> bool:
        routed = self._routed(args)
        if routed is None or routed.tool is self:
            return True  # every action here answers with a screenshot
        return routed.tool.taints_turn(routed.args, ctx)

    def title(self, args: dict[str, Any]) -> str:
        routed = self._routed(args)
        if routed is None or routed.tool is self:
            shown = {k: v for k, v in args.items() if k != "action"}
            return f"{args.get('action', '')} {shown}"[:200] if shown else str(args.get("action"))
        return routed.tool.title(routed.args)

    def _routed(self, args: dict[str, Any]) -> Routed | None:
        try:
            return self.route(args)
        except ValueError:
            return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        routed = self.route(args)
        try:
            if routed.tool is self:
                output = await super().run(args, ctx)
            else:
                output = await routed.tool.run(routed.args, ctx)
        except ToolError as exc:  # said as the model's tool is named
            raise ToolError(str(exc).replace(f"{routed.tool.name}:", f"{self.name}:", 1)) from None
        media = [dataclasses.replace(image, tool_use_id=ctx.call_id) for image in output.media]
        return dataclasses.replace(output, media=media)

    # -- the actions no function tool does -----------------------------------------------

    async def act(self, desk: Desk, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        action = str(args["action"])
        if action == "hold_key":
            combo = parse_held(str(args["text"]))
            seconds = float(args["duration"])
            await desk.backend.hold(combo, True)
            try:
                await asyncio.sleep(seconds)
            finally:
                await desk.backend.hold(combo, False)
            return await self.answer(desk, f"Held {combo} for {seconds:g} s.", {}, ctx)
        if action == "key":
            combo = parse_combo(str(args["text"]))
            repeat = int(args.get("repeat", 1))
            for _ in range(repeat):
                await desk.backend.key(combo)
            return await self.answer(desk, f"Pressed {combo} {repeat} times.", {}, ctx)
        at = await self._at(desk, args)
        if action in ("left_mouse_down", "left_mouse_up"):
            if args.get("coordinate") is not None:
                await desk.backend.move(*at)
            down = action == "left_mouse_down"
            await desk.backend.button(down)
            did = "Pressed the left button" if down else "Released the left button"
            return await self.answer(desk, f"{did} at {self._shown(args, desk, at)}.", {}, ctx)
        held = parse_held(str(args["text"])) if args.get("text") else None
        where = self._shown(args, desk, at)
        if held is not None:
            await desk.backend.hold(held, True)
        try:
            if action == "scroll":
                direction, amount = args["scroll_direction"], int(args.get("scroll_amount", 3))
                await desk.backend.scroll(*at, direction, amount)
                did = f"Scrolled {direction} {amount} at {where}"
            elif action == "left_click_drag":
                start = _needed(_point(args.get("start_coordinate")), "start_coordinate", action)
                geometry = await desk.known_geometry()
                await desk.backend.drag(geometry.to_input(*start), at)
                did = f"Dragged from ({start[0]}, {start[1]}) to {where}"
            else:
                button, count = CLICKS[action]
                await desk.backend.click(*at, button, count)
                did = f"Clicked {button} {count} times at {where}"
        finally:
            if held is not None:
                await desk.backend.hold(held, False)
        with_keys = f" holding {held}" if held is not None else ""
        return await self.answer(desk, f"{did}{with_keys}.", {}, ctx)

    async def _at(self, desk: Desk, args: dict[str, Any]) -> tuple[int, int]:
        """The call's coordinate in input space, or where the pointer is when it gives
        none (BackendError when the desktop cannot tell)."""
        point = _point(args.get("coordinate"))
        if point is not None:
            return (await desk.known_geometry()).to_input(*point)
        at = await desk.backend.pointer()
        if at is None:
            raise BackendError(f"{desk.where} cannot tell where the pointer is: give a coordinate")
        return at

    @staticmethod
    def _shown(args: dict[str, Any], desk: Desk, at: tuple[int, int]) -> str:
        point = _point(args.get("coordinate"))
        if point is not None:
            return f"({point[0]}, {point[1]})"
        if desk.geometry is not None:
            return "({}, {})".format(*desk.geometry.to_shown(*at))
        return "the pointer"


def _point(value: Any) -> tuple[int, int] | None:
    """[x, y] as a pair, or None when the call gives no such point."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return int(value[0]), int(value[1])
    return None


def _needed(point: tuple[int, int] | None, key: str, action: str) -> tuple[int, int]:
    if point is None:
        raise ValueError(f"{action} needs {key} [x, y]")
    return point


def _display(desk: Desk | None) -> int | None:
    """The desk's X display number, when it has one and it is known."""
    if desk is None:
        return None
    if desk.xvfb is not None:
        return desk.xvfb.state.display
    found = _DISPLAY.search(desk.backend.commands.env.get("DISPLAY", ""))
    return int(found.group(1)) if found and desk.backend.name == "x11" else None
