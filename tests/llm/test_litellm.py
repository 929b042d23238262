"""The litellm adapter: conversion and the missing-package error without litellm installed;
the live path only when the extra is installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from habakkuk.engine.config import ModelRef, ProviderConfig, parse_config
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.llm.adapters import litellm as adapter
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.engine.llm.provider import ProviderError
from habakkuk.engine.llm.types import (
    Message,
    ModelRequest,
    StreamDone,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from tests.fakes.model_server import FakeModelServer, Reply

REQUEST = ModelRequest(
    model="gemini-2.5-flash",
    system="be brief",
    messages=[
        Message.user_text("read a"),
        Message("assistant", [ToolUseBlock("c1", "read_file", {"path": "a"})]),
        Message("user", [ToolResultBlock("c1", "text of a")]),
    ],
    tools=[ToolSpec("read_file", "Read", {"type": "object"})],
    api_key="AIza-test",
)


def gemini_config(tmp_path: Path) -> ProviderConfig:
    text = (
        "providers:\n  gemini: {type: litellm, preset: gemini}\n"
        "agents:\n  main: {model: gemini/gemini-2.5-flash}\n"
    )
    home = Home(tmp_path)
    return parse_config(text, home.config_path, home).providers["gemini"]


def test_a_litellm_provider_on_the_gemini_preset_gets_its_key_variable(
    tmp_path: Path,
) -> None:
    # The gemini preset alone is the native adapter (tests/llm/test_gemini.py); litellm
    # still routes to Gemini when asked to.
    config = gemini_config(tmp_path)
    assert config.type == "litellm"
    assert config.key_vars == ["GEMINI_API_KEY"]


def test_messages_convert_to_chat_shape_with_litellm_routing(tmp_path: Path) -> None:
    params = adapter.build_params(gemini_config(tmp_path), REQUEST)
    assert params["model"] == "gemini/gemini-2.5-flash"
    assert params["api_key"] == "AIza-test"
    assert "api_base" not in params
    assert params["num_retries"] == 0  # the router is the only one retrying
    assert params["stream"] is True
    assert params["stream_options"] == {"include_usage": True}
    assert [m["role"] for m in params["messages"]] == ["system", "user", "assistant", "tool"]
    assert params["messages"][2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert params["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "text of a"}
    assert params["tools"][0]["function"]["name"] == "read_file"


def test_a_prefixed_model_is_left_alone() -> None:
    config = ProviderConfig(type="litellm", preset="gemini")
    assert adapter.litellm_model(config, "gemini/gemini-2.5-pro") == "gemini/gemini-2.5-pro"
    assert adapter.litellm_model(ProviderConfig(type="litellm"), "mistral/x") == "mistral/x"


async def test_missing_litellm_is_a_clear_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # import litellm -> ImportError
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    provider = adapter.create(gemini_config(tmp_path))
    with pytest.raises(ProviderError) as caught:
        async for _ in provider.stream(REQUEST):
            pass
    assert caught.value.error_class == "bad_request"
    assert "pip install 'habakkuk[litellm]'" in str(caught.value)
    # The cost map is local before litellm is ever imported (no network at import).
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_building_a_litellm_provider_does_not_import_litellm(tmp_path: Path) -> None:
    text = (
        "providers:\n  gemini: {type: litellm, preset: gemini}\n"
        "agents:\n  main: {model: gemini/gemini-2.5-flash}\n"
    )
    home = Home(tmp_path)
    config = parse_config(text, home.config_path, home)
    hub = ProviderHub(config, Environment(None), home.root)
    had = "litellm" in sys.modules
    hub.provider(ModelRef("gemini", "gemini-2.5-flash"))
    assert ("litellm" in sys.modules) == had


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


@pytest.mark.optional_extra("litellm")
async def test_live_litellm_against_the_fake_server(server: FakeModelServer) -> None:
    pytest.importorskip("litellm")
    server.script(Reply(text="via litellm", input_tokens=7, output_tokens=3))
    config = ProviderConfig(type="litellm", base_url=f"{server.base_url}/v1")
    config.name = "gw"
    provider = adapter.create(config)
    request = ModelRequest(
        model="openai/gpt-fake", system="", messages=[Message.user_text("hi")], api_key="k"
    )
    events = [e async for e in provider.stream(request)]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.blocks == [TextBlock("via litellm")]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (7, 3)
