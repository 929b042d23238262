"""A real turn where the model uses Anthropic's native computer tool, end to end: the
agent on an all-native chain is offered the native tool (with computer_open, without the
computer_* function tools), the fake model (speaking the real Messages wire) clicks
through it, the click lands on xev on the agent's real Xvfb where computer_click would
put it, and the next request carries the call's screenshot inside its result."""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import Any

import pytest

from habakkuk.engine.llm.types import ImageBlock, ToolUseBlock
from habakkuk.tools.computer.native import NativeComputerTool
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.helpers import eventually

from .xdesk import Xev, needs_x

pytestmark = needs_x


def config(url: str, model: str) -> str:
    return (
        "providers:\n"
        f"  remote:\n    type: anthropic\n    base_url: {url}\n    key_env: REMOTE_KEY\n"
        f"agents:\n  main:\n    model: remote/{model}\n    mode: full\n"
        "    toolsets: [core, computer, computer-open]\n"
        "    computer:\n      size: 1600x1000\n"
    )


async def watch_xev(env: dict[str, str]) -> tuple[Xev, asyncio.Task[None]]:
    """xev on the display of `env`, its window mapped, and the task reading its report."""
    process = await asyncio.create_subprocess_exec(
        "xev", "-geometry", "600x400+100+100", "-event", "button",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    xev = Xev(process)

    async def read() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            xev.lines.append(line.decode("utf-8", "replace").strip())

    reader = asyncio.get_running_loop().create_task(read())

    def mapped() -> bool:
        found = subprocess.run(["xdotool", "search", "--name", "Event Tester"], env=env,
                               capture_output=True)  # fmt: skip
        return found.returncode == 0 and bool(found.stdout.strip())

    await eventually(mapped, what="xev's window")
    return xev, reader


@pytest.mark.parametrize(
    ("model", "call", "declared"),
    [
        (
            "claude-opus-5",
            ToolCall("left_click", {"coordinate": [300, 250]}, toolset="computer"),
            {"type": "computer_toolset_20260801"},
        ),
        (
            "claude-sonnet-4-6",
            ToolCall("computer", {"action": "left_click", "coordinate": [300, 250]}),
            {"type": "computer_20251124", "name": "computer", "display_width_px": 1366,
             "display_height_px": 854, "enable_zoom": True},
        ),
    ],
)  # fmt: skip
async def test_the_model_clicks_through_the_native_tool_on_a_real_desktop(
    runtime_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    call: ToolCall,
    declared: dict[str, Any],
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    async with FakeModelServer() as server:
        runtime = await runtime_factory(config(server.base_url, model))
        native = runtime.tools.native("computer")
        assert isinstance(native, NativeComputerTool)
        desk = await native.desktops.desk(runtime.home.root, "main")
        assert desk.xvfb is not None
        xev, reader = await watch_xev({"PATH": os.environ["PATH"], **desk.xvfb.state.env})
        try:
            server.script(Reply(tool_calls=[call]), Reply(text="Clicked."))
            session = await runtime.sessions.new_session("main")
            runtime.start_workers()
            outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "click"))
            await eventually(lambda: (351, 293) in xev.presses(), what=f"click: {xev.text()}")
        finally:
            xev.process.kill()
            await xev.process.wait()
            await reader
        bodies = [r.json for r in server.requests]
        headers = [r.headers for r in server.requests]
        messages = await runtime.sessions.messages(session.id)
    assert outcome.reply == "Clicked."
    tools = bodies[0]["tools"]
    names = {tool.get("name") for tool in tools}
    assert "computer_open" in names and "computer_click" not in names
    native_entry = {k: v for k, v in tools[-1].items() if k not in ("cache_control",)}
    native_entry.pop("display_number", None)  # the desk's display, whichever was free
    assert native_entry == declared
    if model == "claude-sonnet-4-6":
        assert "computer-use-2025-11-24" in headers[0]["anthropic-beta"]
    [result] = bodies[1]["messages"][-1]["content"]
    assert result["type"] == "tool_result"
    assert [part["type"] for part in result["content"]] == ["text", "image"]
    assert ("toolset_name" in result) == (call.toolset is not None)
    stored = messages[1].message.blocks[-1]
    assert isinstance(stored, ToolUseBlock) and stored.tool == "computer"
    assert stored.input == {"action": "left_click", "coordinate": [300, 250]}
    image = messages[2].message.blocks[1]
    assert isinstance(image, ImageBlock) and image.tool_use_id == stored.tool_use_id
