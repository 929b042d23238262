"""The computer toolset through a real turn on the Anthropic wire (the fake model server
refuses a misplaced image): an agent listing the toolset is offered the tools (its
fallback has no native computer tool, so the chain keeps the function tools), its
screenshot reaches the model after the tool result, and the runtime's close stops the
desktop its turn started."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.llm.types import ImageBlock
from habakkuk.tools.computer.xvfb import read_state
from tests.conftest import remote_config
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

from .xdesk import alive, needs_x

pytestmark = needs_x


async def test_a_screenshot_reaches_the_model_and_the_desktop_stops_with_the_runtime(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    extra = (
        "    toolsets: [core, computer, computer-open]\n    computer:\n      size: 1600x1000\n"
        "    fallbacks: [remote/claude-3-5-haiku]\n"  # no native computer tool
    )
    async with FakeModelServer() as server:
        runtime = await runtime_factory(remote_config("anthropic", server.base_url) + extra)
        server.script(
            Reply(tool_calls=[ToolCall("computer_screenshot", {})]),
            Reply(text="A black desktop."),
        )
        session = await runtime.sessions.new_session("main")
        runtime.start_workers()
        outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "look"))
        bodies = [r.json for r in server.requests]
        messages = await runtime.sessions.messages(session.id)
        state = read_state(runtime.home.root, "main")
        assert state is not None and alive(state.pid)
        await runtime.close()
    assert outcome.reply == "A black desktop."
    offered = {tool["name"] for tool in bodies[0]["tools"] if "name" in tool}
    assert {"computer_screenshot", "computer_click", "computer_open"} <= offered
    assert not any(str(tool.get("type", "")).startswith("computer") for tool in bodies[0]["tools"])
    assert [b["type"] for b in bodies[1]["messages"][-1]["content"]] == ["tool_result", "image"]
    result = bodies[1]["messages"][-1]["content"][0]
    assert "1366x854 (captured at 1600x1000, scaled)" in str(result["content"])
    image = messages[2].message.blocks[1]
    assert isinstance(image, ImageBlock) and image.media_type == "image/png"
    assert not alive(state.pid)  # the runtime's close stopped the desktop
    assert read_state(runtime.home.root, "main") is None
