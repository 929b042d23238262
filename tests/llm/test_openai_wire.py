"""The OpenAI adapters send, through the SDK's raw request path, the request `create` sends.

The adapters skip `chat.completions.create` / `responses.create` (their per-call walk
of every tool schema) and post a body they encode once, each tool's JSON reused
across calls. What the fake model server receives from them is compared with what
it receives from the SDK's own `create` given the same parameters, call by call
through a turn of several calls: if a new SDK version changes what `create` sends,
these tests fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from habakkuk.engine.config import ProviderConfig
from habakkuk.engine.llm.adapters import openai_chat, responses
from habakkuk.engine.llm.adapters.openai_raw import ToolsJson
from habakkuk.engine.llm.types import (
    Message,
    ModelRequest,
    StreamDone,
    ToolResultBlock,
    ToolSpec,
)
from habakkuk.engine.presets import ProviderType
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, ToolCall

SCHEMA_A: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "a path, e.g. «notes/é.md»"}},
    "required": ["path"],
}
SCHEMA_B: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
TOOLS = [
    ToolSpec("read_file", "Read a file", SCHEMA_A),
    ToolSpec("list_dir", "List a folder", SCHEMA_B),
    ToolSpec("write_file", "Write a file", {"type": "object"}),
]
Adapter = openai_chat.OpenAIChatProvider | responses.ResponsesProvider
KINDS: list[ProviderType] = ["openai", "responses"]


@pytest.fixture
async def clients() -> AsyncIterator[list[Any]]:
    made: list[Any] = []
    yield made
    for closable in made:  # our adapters have aclose(), the SDK's clients close()
        await (closable.aclose() if hasattr(closable, "aclose") else closable.close())


def adapter(kind: ProviderType, server: FakeModelServer, made: list[Any]) -> Adapter:
    config = ProviderConfig(type=kind, base_url=f"{server.base_url}/v1")
    config.name = kind
    provider: Adapter
    if kind == "openai":
        provider = openai_chat.OpenAIChatProvider(config)
    else:
        provider = responses.ResponsesProvider(config)
    made.append(provider)
    return provider


async def sent_by_create(
    kind: str, server: FakeModelServer, params: dict[str, Any], made: list[Any]
) -> RecordedRequest:
    """What the server receives when the SDK's own `create` sends `params`."""
    client = openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key="sk-wire", max_retries=0)
    made.append(client)
    server.script(Reply(text="ok"))
    if kind == "openai":
        stream: Any = await client.chat.completions.create(**params)
    else:
        stream = await client.responses.create(**params)
    async for _ in stream:
        pass
    return server.requests[-1]


async def one_call(provider: Adapter, request: ModelRequest) -> StreamDone:
    events = [event async for event in provider.stream(request)]
    done = events[-1]
    assert isinstance(done, StreamDone)
    return done


def tool_names(kind: ProviderType, body: dict[str, Any]) -> list[str]:
    return [t["name"] if kind == "responses" else t["function"]["name"] for t in body["tools"]]


@pytest.mark.parametrize("kind", KINDS)
async def test_each_call_of_a_turn_sends_the_body_create_would_send(
    kind: ProviderType, model_server: FakeModelServer, clients: list[Any]
) -> None:
    provider = adapter(kind, model_server, clients)
    history = [Message.user_text("read a, then list b")]
    replies = [
        Reply(tool_calls=[ToolCall("read_file", {"path": "a"}, id="call_1")]),
        Reply(tool_calls=[ToolCall("list_dir", {}, id="call_2")]),
        Reply(text="both done"),
    ]
    for number, reply in enumerate(replies):
        request = ModelRequest(
            model="gpt-fake",
            system="You are terse.",
            messages=list(history),
            tools=[ToolSpec(t.name, t.description, t.input_schema) for t in TOOLS],
            thinking="low",
            api_key="sk-wire",
        )
        model_server.script(reply)
        done = await one_call(provider, request)
        ours = model_server.requests[-1]
        theirs = await sent_by_create(kind, model_server, provider.params(request), clients)
        assert ours.path == theirs.path
        assert ours.json == theirs.json, f"call {number + 1}"
        assert ours.api_key == theirs.api_key == "sk-wire"
        assert ours.headers["content-type"] == theirs.headers["content-type"]
        assert tool_names(kind, ours.json) == [t.name for t in TOOLS]
        history.append(done.message)
        if done.message.tool_uses:
            call = done.message.tool_uses[0]
            history.append(Message("user", [ToolResultBlock(call.tool_use_id, "ok", False)]))
    assert history[-1].text == "both done"
    # Each tool was encoded once for the whole turn (the specs were new objects each call).
    assert len(provider.tools_json) == len(TOOLS)


async def test_a_call_without_tools_sends_no_tools_key(
    model_server: FakeModelServer, clients: list[Any]
) -> None:
    provider = adapter("openai", model_server, clients)
    model_server.script(Reply(text="hi"))
    request = ModelRequest(
        model="gpt-fake", system="", messages=[Message.user_text("hi")], api_key="k"
    )
    await one_call(provider, request)
    assert "tools" not in model_server.requests[-1].json
    assert model_server.requests[-1].json["messages"] == [{"role": "user", "content": "hi"}]


def chat_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


def test_a_changed_description_or_a_new_schema_object_is_encoded_afresh() -> None:
    import json

    cache = ToolsJson(openai_chat.chat_tool_key)
    first = json.loads(cache.encode([chat_tool("agents", "Agents: main", SCHEMA_B)]))
    renamed = json.loads(cache.encode([chat_tool("agents", "Agents: main, ops", SCHEMA_B)]))
    replaced = {"type": "object", "properties": {"x": {"type": "integer"}}}
    reshaped = json.loads(cache.encode([chat_tool("agents", "Agents: main, ops", replaced)]))
    assert first[0]["function"]["description"] == "Agents: main"
    assert renamed[0]["function"]["description"] == "Agents: main, ops"
    assert reshaped[0]["function"]["parameters"] == replaced


def test_the_cache_keeps_at_most_its_number_of_tools() -> None:
    cache = ToolsJson(openai_chat.chat_tool_key, entries=2)
    for number in range(5):
        cache.encode([chat_tool(f"tool_{number}", "d", SCHEMA_A)])
    assert len(cache) == 2
