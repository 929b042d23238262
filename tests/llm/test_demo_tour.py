"""The mock provider's demo tour: model `tour` of an unscripted mock follows the tour's script."""

from __future__ import annotations

import pytest

from habakkuk.engine.llm.mock import MockProvider, parse_script
from habakkuk.engine.llm.types import Message, ModelRequest, StreamDone, TextBlock


async def _reply(provider: MockProvider, model: str, text: str) -> Message:
    request = ModelRequest(model=model, system="", messages=[Message("user", [TextBlock(text)])])
    done = [event async for event in provider.stream(request) if isinstance(event, StreamDone)]
    return done[0].message


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("please run a command", "exec"),
        ("sleep for a while", "exec"),
        ("write a note", "write_file"),
        ("ask me something", "clarify"),
    ],
)
async def test_tour_scenarios_call_the_tool_they_demonstrate(text: str, tool: str) -> None:
    provider = MockProvider("demo", parse_script(None, "demo"), tour=True)
    reply = await _reply(provider, "tour", text)
    assert [call.tool for call in reply.tool_uses] == [tool]


async def test_anything_else_gets_the_introduction_and_other_models_still_echo() -> None:
    provider = MockProvider("demo", parse_script(None, "demo"), tour=True)
    intro = await _reply(provider, "tour", "good morning")
    assert "You said: good morning" in intro.text and "`run a command`" in intro.text
    echo = await _reply(provider, "echo", "please run a command")
    assert not echo.tool_uses and "You said: please run a command" in echo.text


async def test_a_scripted_mock_never_plays_the_tour() -> None:
    provider = MockProvider("demo", parse_script(["scripted"], "demo"), tour=False)
    reply = await _reply(provider, "tour", "run a command")
    assert reply.text == "scripted" and not reply.tool_uses
