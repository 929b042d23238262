"""The a2a toolset in a turn: a configured peer runs, a URL needs approval below full."""

from __future__ import annotations

from typing import Any

from habakkuk.engine.llm.types import ToolResultBlock
from tests.conftest import mock_config

from .sdk_server import reference_agent


def _config(url: str, to: str, mode: str) -> str:
    script = f"""
- steps:
    - tool_calls: [{{name: a2a_send, arguments: {{to: "{to}", message: "ping"}}}}]
    - text: "sent"
"""
    extra = (
        "    toolsets: [core, a2a]\n"
        "a2a:\n  peers:\n    ref:\n"
        f"      url: {url}\n"
        "tools:\n  allow_private_urls: true\n"
    )
    return mock_config(script, mode=mode, extra=extra)


async def _tool_result(runtime: Any) -> ToolResultBlock:
    session = await runtime.sessions.new_session("main", origin="cli")
    turn = await runtime.turns.submit(session.id, "go")
    outcome = await runtime.turns.wait_turn(turn)
    assert outcome.status == "done", outcome
    for stored in await runtime.sessions.messages(session.id):
        for block in stored.message.blocks:
            if isinstance(block, ToolResultBlock):
                return block
    raise AssertionError("no tool result")


async def test_a_configured_peer_is_sent_to_in_workspace_mode(runtime_factory: Any) -> None:
    async with reference_agent("1.0") as ref:
        runtime = await runtime_factory(_config(ref.url, "ref", "workspace"))
        runtime.start_workers()
        result = await _tool_result(runtime)
    assert not result.is_error, result.text
    assert '"state": "completed"' in result.text and "peer says: ping" in result.text


async def test_a_url_needs_approval_below_full_mode(runtime_factory: Any) -> None:
    async with reference_agent("1.0") as ref:
        runtime = await runtime_factory(_config(ref.url, ref.url, "workspace"))
        runtime.start_workers()
        result = await _tool_result(runtime)
        assert result.is_error and "needs approval" in result.text
        assert ref.seen.texts == []


async def test_a_url_is_sent_to_in_full_mode(runtime_factory: Any) -> None:
    async with reference_agent("0.3") as ref:
        runtime = await runtime_factory(_config(ref.url, ref.url, "full"))
        runtime.start_workers()
        result = await _tool_result(runtime)
    assert not result.is_error, result.text
    assert "peer says: ping" in result.text
