"""The mock provider's demo tour: model `tour` of an unscripted mock follows the tour's script."""

from __future__ import annotations

import pytest

from habakkuk.engine.agent.turn import NOT_RUN, STOPPED
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.llm.mock import MockProvider, parse_script
from habakkuk.engine.llm.types import (
    Message,
    ModelRequest,
    StreamDone,
    TextBlock,
    ToolResultBlock,
)
from habakkuk.engine.sessions import INTERRUPTED


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


async def _reply_after(provider: MockProvider, text: str, result: str, is_error: bool) -> str:
    """The tour's reply once the call it made came back with `result`."""
    first = await _reply(provider, "tour", text)
    call = first.tool_uses[0]
    messages = [
        Message("user", [TextBlock(text)]),
        first,
        Message("user", [ToolResultBlock(call.tool_use_id, result, is_error)]),
    ]
    request = ModelRequest(model="tour", system="", messages=messages)
    done = [event async for event in provider.stream(request) if isinstance(event, StreamDone)]
    return done[0].message.text


@pytest.mark.parametrize("text", ["sleep for a while", "please run a command"])
@pytest.mark.parametrize(
    ("result", "is_error", "says", "never"),
    [
        ("woke", False, None, "denied"),
        ("denied by human", True, "denied", "ran to the end"),
        (STOPPED, True, "stopped", "ran to the end"),
        (NOT_RUN, True, "never ran", "ran to the end"),
        (INTERRUPTED, True, "stopped", "ran to the end"),
        ("exec: exit status 2", True, "failed", "ran to the end"),
    ],
)
async def test_the_reply_after_a_command_says_what_happened_to_it(
    text: str, result: str, is_error: bool, says: str | None, never: str
) -> None:
    provider = MockProvider("demo", parse_script(None, "demo"), tour=True)
    reply = await _reply_after(provider, text, result, is_error)
    if says is not None:
        assert says in reply
    assert never not in reply


def test_a_scripted_step_names_only_known_outcomes() -> None:
    with pytest.raises(ConfigError, match=r"demo\[0\]\.after: unknown outcome 'skipped'"):
        parse_script([{"text": "x", "after": {"skipped": "y"}}], "demo")
