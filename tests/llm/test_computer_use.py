"""The native computer tool on the Anthropic wire (llm/computer_use.py and the adapter):
which model gets which version, the tools entry and beta header the real SDK sends for
each, a toolset call folded into a stored `computer` call and split back on replay, the
result echoing toolset_name with its screenshot inside, and no native tool for a chain
with any other model. The fake model server checks what the real API checks (the beta
flag of a beta tool, toolset_name on the result, the image inside the result)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from habakkuk.engine.config import ModelRef, ProviderConfig, parse_config
from habakkuk.engine.home import Home
from habakkuk.engine.llm.adapters.anthropic import AnthropicProvider
from habakkuk.engine.llm.computer_use import (
    COMPUTER_20250124,
    COMPUTER_20251124,
    TOOLSET_20260801,
    ComputerVersion,
    chain_has_native,
    computer_version,
)
from habakkuk.engine.llm.types import (
    ImageBlock,
    Message,
    ModelRequest,
    NativeComputer,
    StreamDone,
    StreamEvent,
    TextBlock,
    ToolCallStart,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

DISPLAY = NativeComputer(1366, 854, 99)
READ = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})


@pytest.mark.parametrize(
    ("model", "version"),
    [
        ("claude-opus-5", TOOLSET_20260801),
        ("claude-haiku-5-5-20261001", TOOLSET_20260801),
        ("claude-sonnet-6", TOOLSET_20260801),
        ("claude-opus-4-7", COMPUTER_20251124),
        ("claude-opus-4-5-20251101", COMPUTER_20251124),
        ("claude-sonnet-4-6", COMPUTER_20251124),
        ("anthropic/claude-opus-4.6", COMPUTER_20251124),
        ("claude-sonnet-4-5-20250929", COMPUTER_20250124),
        ("claude-haiku-4-5", COMPUTER_20250124),
        ("claude-opus-4-1", COMPUTER_20250124),
        ("claude-sonnet-4-20250514", COMPUTER_20250124),
        ("claude-3-7-sonnet-20250219", COMPUTER_20250124),
        ("claude-3-5-haiku", None),
        ("claude-haiku-3", None),
        ("gpt-5", None),
        ("claude-fake", None),
    ],
)
def test_each_model_gets_the_version_the_table_names(
    model: str, version: ComputerVersion | None
) -> None:
    assert computer_version("anthropic", model) == version


def test_only_an_all_native_chain_on_anthropic_has_the_native_tool() -> None:
    assert computer_version("bedrock", "claude-opus-5") is None
    assert chain_has_native([("anthropic", "claude-opus-5"), ("anthropic", "claude-sonnet-4-5")])
    assert not chain_has_native([("anthropic", "claude-opus-5"), ("openai", "gpt-5")])
    assert not chain_has_native([("anthropic", "claude-opus-5"), ("anthropic", "claude-3-5-haiku")])
    assert not chain_has_native([])


def test_the_turn_reads_each_model_s_adapter_kind_from_its_provider(tmp_path: Path) -> None:
    from habakkuk.engine.agent.native import chain_kinds

    text = (
        "providers:\n  claude:\n    type: anthropic\n  oa:\n    type: openai\n"
        "agents:\n  main:\n    model: claude/claude-opus-5\n"
    )
    config = parse_config(text, tmp_path / "config.yaml", Home(tmp_path))
    chain = [ModelRef("claude", "claude-opus-5"), ModelRef("oa", "gpt-5"), ModelRef("x", "m")]
    assert chain_kinds(config, chain) == [
        ("anthropic", "claude-opus-5"),
        ("openai", "gpt-5"),
        ("", "m"),
    ]


# -- the wire --------------------------------------------------------------------------


@pytest.fixture
async def provider(model_server: FakeModelServer) -> AsyncIterator[AnthropicProvider]:
    config = ProviderConfig(type="anthropic", base_url=model_server.base_url)
    config.name = "anthropic"
    made = AnthropicProvider(config)
    yield made
    await made.aclose()


def screenshot(folder: Path) -> str:
    out = io.BytesIO()
    Image.new("RGB", (16, 10), (10, 200, 10)).save(out, "PNG")
    path = folder / "screen.png"
    path.write_bytes(out.getvalue())
    return str(path)


def ask(model: str, *messages: Message, computer: NativeComputer | None = DISPLAY) -> ModelRequest:
    history = list(messages) or [Message.user_text("click the button")]
    return ModelRequest(
        model=model,
        system="You use a desktop.",
        messages=history,
        tools=[READ],
        api_key="sk-test",
        computer=computer,
    )


async def stream(provider: AnthropicProvider, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


def conversation(folder: Path) -> list[Message]:
    """A stored native click, its result and the screenshot it attached."""
    call = ToolUseBlock(
        "toolu_1", "computer", {"action": "left_click", "coordinate": [10, 20]}, toolset="computer"
    )
    return [
        Message.user_text("click the button"),
        Message("assistant", [call]),
        Message(
            "user",
            [
                ToolResultBlock("toolu_1", "Clicked left at (10, 20)."),
                ImageBlock("image/png", screenshot(folder), "screen.png", tool_use_id="toolu_1"),
            ],
        ),
    ]


async def test_a_claude_5_toolset_call_is_stored_as_a_computer_call_with_its_action(
    provider: AnthropicProvider, model_server: FakeModelServer
) -> None:
    model_server.script(
        Reply(tool_calls=[ToolCall("left_click", {"coordinate": [10, 20]}, toolset="computer")])
    )
    events = await stream(provider, ask("claude-opus-5"))
    sent = model_server.requests[-1]
    assert sent.json["tools"][0]["name"] == "read_file"
    assert {k: v for k, v in sent.json["tools"][1].items() if k != "cache_control"} == {
        "type": "computer_toolset_20260801"
    }
    assert "anthropic-beta" not in sent.headers  # generally available: no beta
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [s.tool for s in starts] == ["computer"]
    done = events[-1]
    assert isinstance(done, StreamDone)
    [call] = done.message.tool_uses
    assert call.tool == "computer" and call.toolset == "computer"
    assert call.input == {"action": "left_click", "coordinate": [10, 20]}


async def test_a_toolset_call_is_split_back_and_its_result_holds_the_screenshot(
    provider: AnthropicProvider, model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.script(Reply(text="Done."))
    await stream(provider, ask("claude-opus-5", *conversation(tmp_path)))
    messages = model_server.requests[-1].json["messages"]
    [use] = messages[1]["content"]
    assert use == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "left_click",
        "input": {"coordinate": [10, 20]},
        "toolset_name": "computer",
    }
    [result] = messages[2]["content"]  # the screenshot is inside, not after it
    assert result["toolset_name"] == "computer" and result["tool_use_id"] == "toolu_1"
    assert [part["type"] for part in result["content"]] == ["text", "image"]
    assert result["content"][0]["text"] == "Clicked left at (10, 20)."
    assert result["content"][1]["source"]["media_type"] == "image/png"


@pytest.mark.parametrize(
    ("model", "kind", "beta", "zoom"),
    [
        ("claude-opus-4-7", "computer_20251124", "computer-use-2025-11-24", True),
        ("claude-sonnet-4-5", "computer_20250124", "computer-use-2025-01-24", False),
    ],
)
async def test_a_claude_4_model_gets_the_sized_tool_and_its_beta_header(
    provider: AnthropicProvider,
    model_server: FakeModelServer,
    tmp_path: Path,
    model: str,
    kind: str,
    beta: str,
    zoom: bool,
) -> None:
    model_server.script(
        Reply(tool_calls=[ToolCall("computer", {"action": "screenshot"})]), Reply(text="Done.")
    )
    events = await stream(provider, ask(model))
    sent = model_server.requests[-1]
    declared: dict[str, Any] = {
        "type": kind,
        "name": "computer",
        "display_width_px": 1366,
        "display_height_px": 854,
        "display_number": 99,
    }
    if zoom:
        declared["enable_zoom"] = True
    assert {k: v for k, v in sent.json["tools"][1].items() if k != "cache_control"} == declared
    assert beta in sent.headers["anthropic-beta"].split(",")
    done = events[-1]
    assert isinstance(done, StreamDone)
    [call] = done.message.tool_uses
    assert (call.tool, call.input, call.toolset) == ("computer", {"action": "screenshot"}, "")

    # The same stored call (even one a Claude 5 model made) replays as this version's.
    await stream(provider, ask(model, *conversation(tmp_path)))
    messages = model_server.requests[-1].json["messages"]
    assert messages[1]["content"][0] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "computer",
        "input": {"action": "left_click", "coordinate": [10, 20]},
    }
    [result] = messages[2]["content"]
    assert "toolset_name" not in result
    assert [part["type"] for part in result["content"]] == ["text", "image"]


async def test_a_request_without_the_native_tool_declares_none_and_keeps_the_image_after(
    provider: AnthropicProvider, model_server: FakeModelServer, tmp_path: Path
) -> None:
    model_server.script(Reply(text="Done."))
    history = conversation(tmp_path)
    await stream(provider, ask("claude-opus-5", *history, computer=None))
    sent = model_server.requests[-1]
    assert [tool.get("name") for tool in sent.json["tools"]] == ["read_file"]
    assert "anthropic-beta" not in sent.headers
    assert [b["type"] for b in sent.json["messages"][2]["content"]] == ["tool_result", "image"]


async def test_a_model_without_the_tool_gets_none_even_when_the_request_asks(
    provider: AnthropicProvider, model_server: FakeModelServer
) -> None:
    model_server.script(Reply(text="Hello."))
    await stream(provider, ask("claude-3-5-haiku", Message("user", [TextBlock("hi")])))
    sent = model_server.requests[-1]
    assert [tool.get("name") for tool in sent.json["tools"]] == ["read_file"]
    assert "anthropic-beta" not in sent.headers


async def test_the_fake_refuses_a_beta_tool_without_its_header(
    model_server: FakeModelServer,
) -> None:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=model_server.base_url, api_key="k", max_retries=0)
    tool = {"type": "computer_20251124", "name": "computer", "display_width_px": 8,
            "display_height_px": 8}  # fmt: skip
    with pytest.raises(anthropic.BadRequestError, match="computer-use-2025-11-24"):
        await client.messages.create(
            model="claude-opus-4-7",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            tools=[tool],  # type: ignore[list-item]  # a beta tool through the GA client, as a mistake would send it
        )
    await client.close()
