"""Every adapter through its real SDK against the fake model server."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import ProviderConfig
from habakkuk.engine.llm.adapters.streaming import ClientStreamingProvider
from habakkuk.engine.llm.provider import Provider, ProviderError
from habakkuk.engine.llm.types import (
    ImageBlock,
    Message,
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from habakkuk.engine.presets import ProviderType
from tests.fakes.model_server import (
    Drop,
    Fail,
    FakeModelServer,
    Reply,
    ToolCall,
    fake_encrypted_content,
    fake_signature,
)

KINDS: list[ProviderType] = ["anthropic", "openai", "responses"]
API_OF = {"anthropic": "anthropic", "openai": "chat", "responses": "responses"}
TOOLS = [
    ToolSpec(
        "read_file",
        "Read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}},
    ),
    ToolSpec("write_file", "Write a file", {"type": "object"}),
]


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


_made: list[Any] = []


@pytest.fixture(autouse=True)
async def _close_providers() -> AsyncIterator[None]:
    yield
    while _made:
        await _made.pop().aclose()


def make(kind: ProviderType, server: FakeModelServer, name: str = "") -> Provider:
    """The real adapter of `kind` pointed at the fake server."""
    import importlib

    module = {"anthropic": "anthropic", "openai": "openai_chat", "responses": "responses"}[kind]
    url = server.base_url if kind == "anthropic" else f"{server.base_url}/v1"
    config = ProviderConfig(type=kind, base_url=url)
    config.name = name or kind
    provider: Provider = importlib.import_module(f"habakkuk.engine.llm.adapters.{module}").create(
        config
    )
    _made.append(provider)
    return provider


def request(*messages: Message, key: str = "sk-test", **kwargs: Any) -> ModelRequest:
    msgs = list(messages) or [Message.user_text("hi")]
    return ModelRequest(
        model="claude-fake", system="You are terse.", messages=msgs, api_key=key, **kwargs
    )


async def collect(provider: Provider, req: ModelRequest) -> tuple[list[StreamEvent], StreamDone]:
    events = [event async for event in provider.stream(req)]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert not any(isinstance(e, StreamDone) for e in events[:-1])
    return events[:-1], done


# -- success paths ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_text_streams_delta_by_delta_with_usage(
    kind: ProviderType, server: FakeModelServer
) -> None:
    server.script(
        Reply(
            text="The answer is forty-two.",
            chunk_size=5,
            input_tokens=120,
            output_tokens=33,
            cache_read_tokens=1000,
            cache_write_tokens=50,
        )
    )
    deltas, done = await collect(make(kind, server), request())
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == [
        "The a",
        "nswer",
        " is f",
        "orty-",
        "two.",
    ]
    assert done.message.role == "assistant"
    assert done.message.text == "The answer is forty-two."
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (120, 33)
    assert (done.usage.cache_read_tokens, done.usage.cache_write_tokens) == (1000, 50)
    sent = server.requests[-1]
    assert sent.api_key == "sk-test"
    assert sent.stream


@pytest.mark.parametrize("kind", KINDS)
async def test_tool_calls_stream_start_then_argument_pieces(
    kind: ProviderType, server: FakeModelServer
) -> None:
    server.script(
        Reply(
            text="Reading both.",
            tool_calls=[
                ToolCall("read_file", {"path": "notes/today.md"}, id="call_a"),
                ToolCall("read_file", {"path": "b.txt", "limit": 3}, id="call_b"),
            ],
        )
    )
    deltas, done = await collect(make(kind, server), request(tools=TOOLS))
    starts = [d for d in deltas if isinstance(d, ToolCallStart)]
    assert [(s.tool_use_id, s.tool) for s in starts] == [
        ("call_a", "read_file"),
        ("call_b", "read_file"),
    ]
    pieces: dict[str, list[str]] = {}
    for d in deltas:
        if isinstance(d, ToolCallDelta):
            pieces.setdefault(d.tool_use_id, []).append(d.arguments)
    assert len(pieces["call_a"]) >= 3  # streamed, not in one piece
    assert json.loads("".join(pieces["call_b"])) == {"path": "b.txt", "limit": 3}
    uses = done.message.tool_uses
    assert [(u.tool_use_id, u.tool, u.input) for u in uses] == [
        ("call_a", "read_file", {"path": "notes/today.md"}),
        ("call_b", "read_file", {"path": "b.txt", "limit": 3}),
    ]
    assert done.stop_reason == "tool_use"


@pytest.mark.parametrize("kind", KINDS)
async def test_tool_round_trip_sends_calls_and_results_in_the_apis_shape(
    kind: ProviderType, server: FakeModelServer
) -> None:
    server.script(Reply(tool_calls=[ToolCall("read_file", {"path": "a"}, id="call_1")]))
    provider = make(kind, server)
    _, first = await collect(provider, request(tools=TOOLS))
    server.script(Reply(text="done"))
    history = [
        Message.user_text("read a"),
        first.message,
        Message("user", [ToolResultBlock("call_1", "file contents", is_error=False)]),
    ]
    _, second = await collect(provider, request(*history, tools=TOOLS))
    assert second.message.text == "done"
    body = server.requests[-1].json
    if kind == "anthropic":
        assert body["messages"][1]["content"] == [
            {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a"}}
        ]
        result = body["messages"][2]["content"][0]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == "call_1"
        assert result["content"] == "file contents"
    elif kind == "openai":
        assistant, tool = body["messages"][2], body["messages"][3]
        assert assistant["role"] == "assistant"
        assert assistant["content"] == ""  # never null
        assert assistant["tool_calls"][0]["id"] == "call_1"
        assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "file contents"}
    else:
        kinds = [item["type"] for item in body["input"]]
        assert kinds == ["message", "function_call", "function_call_output"]
        assert body["input"][2] == {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": "file contents",
        }


async def test_chat_never_sends_empty_tool_calls_or_null_content(server: FakeModelServer) -> None:
    server.script(Reply(text="ok"))
    history = [
        Message.user_text("hello"),
        Message("assistant", [TextBlock("hi!")]),
        Message("assistant", []),  # an empty reply (e.g. a bare stop) is dropped
        Message.user_text("again"),
    ]
    await collect(make("openai", server), request(*history))
    body = server.requests[-1].json
    assert "tools" not in body
    assert body["stream_options"] == {"include_usage": True}
    for message in body["messages"]:
        assert message.get("content") is not None
        assert "tool_calls" not in message or message["tool_calls"]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]


async def test_anthropic_thinking_is_kept_with_its_signature_and_replayed(
    server: FakeModelServer,
) -> None:
    server.script(Reply(thinking="Let me think about it.", text="Yes.", chunk_size=6))
    provider = make("anthropic", server)
    deltas, done = await collect(provider, request(thinking="low"))
    assert "".join(d.text for d in deltas if isinstance(d, ThinkingDelta)) == (
        "Let me think about it."
    )
    thinking = done.message.blocks[0]
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.signature == fake_signature("Let me think about it.")
    sent = server.requests[-1].json
    assert sent["thinking"]["type"] == "enabled"
    assert sent["max_tokens"] > sent["thinking"]["budget_tokens"]
    server.script(Reply(text="again"))
    await collect(provider, request(Message.user_text("q"), done.message, Message.user_text("r")))
    replayed = server.requests[-1].json["messages"][1]["content"][0]
    assert replayed == {
        "type": "thinking",
        "thinking": "Let me think about it.",
        "signature": fake_signature("Let me think about it."),
    }


async def test_anthropic_cache_breakpoints_on_system_last_tool_and_recent_turns(
    server: FakeModelServer,
) -> None:
    server.script(Reply(text="ok"))
    history = [
        Message.user_text("one"),
        Message("assistant", [TextBlock("two")]),
        Message.user_text("three"),
        Message("assistant", [TextBlock("four")]),
        Message.user_text("five"),
    ]
    await collect(make("anthropic", server), request(*history, tools=TOOLS))
    body = server.requests[-1].json
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [
        i
        for i, m in enumerate(body["messages"])
        if any("cache_control" in block for block in m["content"])
    ]
    assert marked == [2, 4]  # this call's end and the previous turn's: the prefix is reused


async def test_anthropic_sends_images_from_blobs_as_base64(
    server: FakeModelServer, tmp_path: Path
) -> None:
    image = tmp_path / "pic.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n fake bytes")
    server.script(Reply(text="a picture"))
    message = Message("user", [TextBlock("what is this?"), ImageBlock("image/png", str(image))])
    await collect(make("anthropic", server), request(message))
    block = server.requests[-1].json["messages"][0]["content"][1]
    assert block["type"] == "image"
    assert block["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(b"\x89PNG\r\n\x1a\n fake bytes").decode(),
    }


async def test_responses_is_stateless_and_replays_encrypted_reasoning(
    server: FakeModelServer,
) -> None:
    server.script(Reply(thinking="Weighing it.", text="Done."))
    provider = make("responses", server)
    deltas, done = await collect(provider, request(thinking="medium"))
    sent = server.requests[-1].json
    assert sent["store"] is False
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert "".join(d.text for d in deltas if isinstance(d, ThinkingDelta)) == "Weighing it."
    reasoning = done.message.blocks[0]
    assert isinstance(reasoning, ThinkingBlock)
    assert reasoning.encrypted == fake_encrypted_content("Weighing it.")
    server.script(Reply(text="next"))
    await collect(provider, request(Message.user_text("a"), done.message, Message.user_text("b")))
    item = server.requests[-1].json["input"][1]
    assert item["type"] == "reasoning"
    assert item["encrypted_content"] == fake_encrypted_content("Weighing it.")
    assert item["id"] == reasoning.signature


async def test_chat_reasoning_content_streams_as_thinking_and_is_not_replayed(
    server: FakeModelServer,
) -> None:
    server.script(Reply(thinking="hmm", text="ok"))
    provider = make("openai", server)
    deltas, done = await collect(provider, request())
    assert [d.text for d in deltas if isinstance(d, ThinkingDelta)] == ["hmm"]
    server.script(Reply(text="again"))
    await collect(provider, request(Message.user_text("a"), done.message, Message.user_text("b")))
    assistant = server.requests[-1].json["messages"][2]
    assert assistant == {"role": "assistant", "content": "ok"}


@pytest.mark.parametrize("kind", KINDS)
async def test_one_sdk_client_per_key_is_reused(
    kind: ProviderType, server: FakeModelServer
) -> None:
    provider = make(kind, server)
    for key in ("k1", "k1", "k2"):
        server.script(Reply(text="x"))
        await collect(provider, request(key=key))
    assert [r.api_key for r in server.requests] == ["k1", "k1", "k2"]
    assert isinstance(provider, ClientStreamingProvider)
    clients = provider.clients
    assert len(clients) == 2
    assert all(c.max_retries == 0 for c in clients._clients.values())


@pytest.mark.parametrize("kind", KINDS)
async def test_missing_key_is_an_auth_error_before_any_request(
    kind: ProviderType, server: FakeModelServer
) -> None:
    provider = make(kind, server, name="remote")
    assert isinstance(provider, ClientStreamingProvider)
    provider.keyless_ok = False
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request(key=""))
    assert caught.value.error_class == "auth"
    assert "providers.remote.key_env" in str(caught.value)
    assert server.requests == []


async def test_local_server_works_without_a_key(server: FakeModelServer) -> None:
    server.script(Reply(text="local"))
    provider = make("openai", server)  # 127.0.0.1: keyless is fine
    _, done = await collect(provider, request(key=""))
    assert done.message.text == "local"


# -- errors --------------------------------------------------------------------------------

ERRORS = [
    (Fail(429, retry_after=7), "rate_limit", 7.0),
    (Fail(529), "overloaded", None),
    (Fail(503), "overloaded", None),
    (Fail(400, "context_overflow"), "context_overflow", None),
    (Fail(401), "auth", None),
    (Fail(403), "auth", None),
    (Fail(402, "billing"), "billing", None),
    (Fail(400), "bad_request", None),
    (Fail(404), "bad_request", None),
    (Fail(422), "bad_request", None),
    (Fail(500), "server", None),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("fail", "error_class", "retry_after"), ERRORS)
async def test_http_errors_map_to_their_classes(
    kind: ProviderType,
    fail: Fail,
    error_class: str,
    retry_after: float | None,
    server: FakeModelServer,
) -> None:
    server.script(fail)
    with pytest.raises(ProviderError) as caught:
        await collect(make(kind, server), request())
    assert caught.value.error_class == error_class
    assert caught.value.status == fail.status
    assert caught.value.retry_after == retry_after
    assert caught.value.provider == kind


async def test_openai_spent_quota_on_429_is_billing_not_rate_limit(
    server: FakeModelServer,
) -> None:
    server.script(Fail(429, "billing"))
    with pytest.raises(ProviderError) as caught:
        await collect(make("openai", server), request())
    assert caught.value.error_class == "billing"


async def test_anthropic_low_credit_400_is_billing(server: FakeModelServer) -> None:
    server.script(Fail(400, "billing"))
    with pytest.raises(ProviderError) as caught:
        await collect(make("anthropic", server), request())
    assert caught.value.error_class == "billing"


@pytest.mark.parametrize("kind", KINDS)
async def test_dropped_connection_mid_stream_is_a_network_error_after_the_deltas(
    kind: ProviderType, server: FakeModelServer
) -> None:
    server.script(Drop(Reply(text="abcdefghijklmnop", chunk_size=3), after_chunks=2))
    got: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        async for event in make(kind, server).stream(request()):
            got.append(event)
    assert caught.value.error_class == "network"
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["abc", "def"]


async def test_unreachable_server_is_a_network_error() -> None:
    async with FakeModelServer() as srv:
        url = srv.base_url
    config = ProviderConfig(type="openai", base_url=f"{url}/v1")
    config.name = "gone"
    from habakkuk.engine.llm.adapters import openai_chat

    provider = openai_chat.create(config)
    _made.append(provider)
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request())
    assert caught.value.error_class == "network"


async def test_tool_use_block_ids_survive_for_every_api(server: FakeModelServer) -> None:
    # A conversation written by one provider can continue on another (fallback).
    server.script(Reply(text="ok"), Reply(text="ok"), Reply(text="ok"))
    history = [
        Message.user_text("go"),
        Message("assistant", [ToolUseBlock("toolu_1", "read_file", {"path": "x"})]),
        Message("user", [ToolResultBlock("toolu_1", "", is_error=True)]),
    ]
    for kind in KINDS:
        _, done = await collect(make(kind, server), request(*history, tools=TOOLS))
        assert done.message.text == "ok"
    chat = server.requests[1].json["messages"][-1]
    assert chat["role"] == "tool"
    assert chat["content"]  # an empty result is never sent as empty content
