"""Anthropic's native computer tool on the Messages wire (llm/computer_use.py).

A request whose `computer` is set declares the version its model needs: the toolset
(`{"type": "computer_toolset_20260801"}`, no name) or the single tool named `computer`
with the display's size. Every call is stored the same way, as a call of the tool
`computer` whose input holds `action` and the action's parameters: a toolset call (a
tool_use named after its member, with `toolset_name`) is folded into that shape when it
arrives and split back when it is replayed to a toolset model. The call's result echoes
`toolset_name` for a toolset model, and the screenshot the call attached (an image block
carrying its tool_use_id) goes inside the result as the API wants, not after it.
"""

from __future__ import annotations

from typing import Any

from ..computer_use import NAME, ComputerVersion
from ..types import ImageBlock, Message, NativeComputer, ToolResultBlock, ToolUseBlock


def declaration(version: ComputerVersion, computer: NativeComputer) -> dict[str, Any]:
    """The tools entry of `version` for the display `computer`."""
    if version.toolset:
        return {"type": version.type}  # every member on, zoom included
    entry: dict[str, Any] = {
        "type": version.type,
        "name": NAME,
        "display_width_px": computer.width,
        "display_height_px": computer.height,
    }
    if computer.display is not None:
        entry["display_number"] = computer.display
    if version.zoom:
        entry["enable_zoom"] = True
    return entry


def stored_input(
    member: str, toolset: str, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The tool name and input a call is stored with: a toolset member's call becomes a
    call of `computer` with the member as its action; any other call stays as it came."""
    if toolset != NAME:
        return member, arguments
    return NAME, {"action": member, **arguments}


class NativeCalls:
    """The conversation's native computer calls, met in order while its messages are
    converted for a request that declares `version` (None: none declared)."""

    def __init__(self, version: ComputerVersion | None):
        self.version = version
        self._ids: set[str] = set()
        self._images: dict[str, list[ImageBlock]] = {}

    def is_native(self, block: ToolUseBlock) -> bool:
        """Whether `block` is a call of the declared native tool."""
        return self.version is not None and block.tool == NAME and isinstance(block.input, dict)

    def start(self, message: Message) -> None:
        """Before `message`'s blocks: the images its native results carry."""
        self._images = {}
        for block in message.blocks:
            if isinstance(block, ImageBlock) and block.tool_use_id in self._ids:
                self._images.setdefault(block.tool_use_id, []).append(block)

    def moved(self, block: ImageBlock) -> bool:
        """Whether `block` goes inside its call's result (so not after the results)."""
        return block.tool_use_id in self._images

    def call(self, block: ToolUseBlock) -> dict[str, Any]:
        """A native call as the declared version spells it."""
        assert self.version is not None  # is_native said so
        self._ids.add(block.tool_use_id)
        if not self.version.toolset:
            return {"type": "tool_use", "id": block.tool_use_id, "name": NAME, "input": block.input}
        arguments = {k: v for k, v in block.input.items() if k != "action"}
        return {
            "type": "tool_use",
            "id": block.tool_use_id,
            "name": str(block.input.get("action", "")),
            "input": arguments,
            "toolset_name": NAME,
        }

    def result(self, block: ToolResultBlock, media: Any) -> dict[str, Any] | None:
        """A native call's result with its screenshots inside (`media` converts an image
        block), or None for another call's result."""
        if self.version is None or block.tool_use_id not in self._ids:
            return None
        content: list[dict[str, Any]] = []
        if block.text:
            content.append({"type": "text", "text": block.text})
        content += [media(image) for image in self._images.get(block.tool_use_id, ())]
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
        if content:
            result["content"] = content
        if block.is_error:
            result["is_error"] = True
        if self.version.toolset:
            result["toolset_name"] = NAME
        return result
