"""The fake model server, checked through the real openai and anthropic SDKs.

If these pass, an adapter built on the SDKs sees from the fake exactly the
objects and exceptions it would see from the real services.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import httpx2
import openai
import pytest

from tests.fakes.model_server import (
    NO_SCRIPT_MESSAGE,
    Drop,
    Fail,
    FakeModelServer,
    RecordedRequest,
    Reply,
    ToolCall,
    WebFetch,
    WebSearch,
    fake_encrypted_content,
    fake_signature,
)

USER: Any = [{"role": "user", "content": "hi"}]
TOOLS_CHAT: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


_open_clients: list[openai.AsyncOpenAI | anthropic.AsyncAnthropic] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    # Clients hold connection pools; close them inside the test's event loop
    # so nothing is left for the garbage collector after the loop is gone.
    yield
    while _open_clients:
        await _open_clients.pop().close()


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


def openai_client(server: FakeModelServer, key: str = "test") -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=key, max_retries=0)
    _open_clients.append(client)
    return client


def anthropic_client(server: FakeModelServer, key: str = "test") -> anthropic.AsyncAnthropic:
    client = anthropic.AsyncAnthropic(base_url=server.base_url, api_key=key, max_retries=0)
    _open_clients.append(client)
    return client


def tool_reply(**kwargs: Any) -> Reply:
    return Reply(
        text="Let me look at both files.",
        tool_calls=[
            ToolCall("read_file", {"path": "notes/today.md", "limit": 200}, id="call_given"),
            ToolCall("read_file", {"path": "b.txt"}),
        ],
        input_tokens=120,
        output_tokens=33,
        cache_read_tokens=1000,
        cache_write_tokens=50,
        **kwargs,
    )


# --- Chat Completions ------------------------------------------------------


async def test_chat_stream_assembles_text_tool_arguments_and_usage_chunk(
    server: FakeModelServer,
) -> None:
    server.script(tool_reply())
    client = openai_client(server)
    stream = await client.chat.completions.create(
        model="gpt-fake",
        messages=USER,
        tools=TOOLS_CHAT,
        stream=True,
        stream_options={"include_usage": True},
    )
    text_deltas: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    arg_pieces: dict[int, int] = {}
    finish = None
    usage = None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
            assert chunk.choices == []
        for choice in chunk.choices:
            if choice.delta.content:
                text_deltas.append(choice.delta.content)
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    call["id"] = tc.id
                if tc.function and tc.function.name:
                    call["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    call["arguments"] += tc.function.arguments
                    arg_pieces[tc.index] = arg_pieces.get(tc.index, 0) + 1
            finish = choice.finish_reason or finish

    assert "".join(text_deltas) == "Let me look at both files."
    assert len(text_deltas) == 4  # 26 characters in chunks of 8
    assert calls[0]["id"] == "call_given"
    assert calls[1]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == {"path": "notes/today.md", "limit": 200}
    assert json.loads(calls[1]["arguments"]) == {"path": "b.txt"}
    assert min(arg_pieces.values()) >= 3
    assert finish == "tool_calls"
    assert usage is not None
    assert usage.prompt_tokens == 120 + 1000 + 50
    assert usage.completion_tokens == 33
    assert usage.total_tokens == 1170 + 33
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 1000
    assert usage.prompt_tokens_details.cache_write_tokens == 50


async def test_chat_stream_sends_no_usage_chunk_unless_asked(server: FakeModelServer) -> None:
    server.script(Reply(text="plain"))
    stream = await openai_client(server).chat.completions.create(
        model="gpt-fake",
        messages=USER,
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_chat_stream_helper_builds_final_completion(server: FakeModelServer) -> None:
    server.script(tool_reply())
    async with openai_client(server).chat.completions.stream(
        model="gpt-fake",
        messages=USER,
        tools=TOOLS_CHAT,
        stream_options={"include_usage": True},
    ) as stream:
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Let me look at both files."
    assert message.tool_calls is not None
    assert [tc.function.arguments for tc in message.tool_calls] == [
        json.dumps({"path": "notes/today.md", "limit": 200}),
        json.dumps({"path": "b.txt"}),
    ]
    assert final.usage is not None and final.usage.prompt_tokens == 1170


async def test_chat_non_streamed_returns_whole_completion(server: FakeModelServer) -> None:
    server.script(tool_reply(thinking="check the notes first"))
    completion = await openai_client(server).chat.completions.create(
        model="gpt-fake",
        messages=USER,
        tools=TOOLS_CHAT,
    )
    choice = completion.choices[0]
    assert completion.model == "gpt-fake"
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look at both files."
    assert choice.message.tool_calls is not None
    first = choice.message.tool_calls[0]
    assert first.id == "call_given" and first.type == "function"
    assert json.loads(first.function.arguments) == {
        "path": "notes/today.md",
        "limit": 200,
    }
    assert (choice.message.model_extra or {})["reasoning_content"] == "check the notes first"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 1000


async def test_chat_length_stop_is_spelled_length(server: FakeModelServer) -> None:
    server.script(Reply(text="cut", stop_reason="max_tokens"))
    completion = await openai_client(server).chat.completions.create(
        model="gpt-fake",
        messages=USER,
    )
    assert completion.choices[0].finish_reason == "length"


# --- Responses ---------------------------------------------------------------


async def test_responses_stream_events_carry_text_arguments_reasoning_and_usage(
    server: FakeModelServer,
) -> None:
    server.script(tool_reply(thinking="the user wants both files"))
    stream = await openai_client(server).responses.create(
        model="gpt-fake",
        input="hi",
        include=["reasoning.encrypted_content"],
        store=False,
        stream=True,
    )
    events = [event async for event in stream]
    types = [event.type for event in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    for expected in (
        "response.output_item.added",
        "response.reasoning_summary_text.delta",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.output_item.done",
    ):
        assert expected in types
    assert [event.sequence_number for event in events] == list(range(len(events)))

    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Let me look at both files."
    reasoning = "".join(
        e.delta for e in events if e.type == "response.reasoning_summary_text.delta"
    )
    assert reasoning == "the user wants both files"
    args_by_item: dict[str, str] = {}
    for e in events:
        if e.type == "response.function_call_arguments.delta":
            args_by_item[e.item_id] = args_by_item.get(e.item_id, "") + e.delta
    assert [json.loads(a) for a in args_by_item.values()] == [
        {"path": "notes/today.md", "limit": 200},
        {"path": "b.txt"},
    ]

    done_items = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in done_items] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    reasoning_item, call_item = done_items[0], done_items[2]
    assert reasoning_item.type == "reasoning" and call_item.type == "function_call"
    assert reasoning_item.encrypted_content == fake_encrypted_content("the user wants both files")
    assert call_item.call_id == "call_given"

    last = events[-1]
    assert last.type == "response.completed"
    completed = last.response
    assert completed.status == "completed"
    assert completed.usage is not None
    assert completed.usage.input_tokens == 1170
    assert completed.usage.output_tokens == 33
    assert completed.usage.input_tokens_details.cached_tokens == 1000
    assert completed.usage.input_tokens_details.cache_write_tokens == 50


async def test_responses_stream_helper_accepts_event_order(server: FakeModelServer) -> None:
    server.script(tool_reply(thinking="plan"))
    async with openai_client(server).responses.stream(
        model="gpt-fake", input="hi", include=["reasoning.encrypted_content"]
    ) as stream:
        final = await stream.get_final_response()
    assert final.output_text == "Let me look at both files."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [json.loads(c.arguments) for c in calls] == [
        {"path": "notes/today.md", "limit": 200},
        {"path": "b.txt"},
    ]
    assert final.output[0].type == "reasoning"
    assert final.output[0].encrypted_content == fake_encrypted_content("plan")


async def test_responses_non_streamed_omits_encrypted_reasoning_unless_included(
    server: FakeModelServer,
) -> None:
    server.script(Reply(text="answer", thinking="why"), Reply(text="again", thinking="why"))
    client = openai_client(server)

    plain = await client.responses.create(model="gpt-fake", input="hi")
    assert plain.output_text == "answer"
    assert plain.output[0].type == "reasoning"
    assert plain.output[0].summary[0].text == "why"
    assert plain.output[0].encrypted_content is None
    assert plain.usage is not None and plain.usage.input_tokens == 10

    included = await client.responses.create(
        model="gpt-fake", input="hi", include=["reasoning.encrypted_content"]
    )
    assert included.output[0].type == "reasoning"
    assert included.output[0].encrypted_content == fake_encrypted_content("why")


async def test_responses_length_stop_is_incomplete(server: FakeModelServer) -> None:
    server.script(Reply(text="cut", stop_reason="max_tokens"))
    stream = await openai_client(server).responses.create(model="gpt-fake", input="hi", stream=True)
    events = [event async for event in stream]
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"


# --- Anthropic Messages ------------------------------------------------------


async def test_anthropic_stream_has_thinking_signature_text_tool_input_and_usage(
    server: FakeModelServer,
) -> None:
    server.script(tool_reply(thinking="Both files are needed."))
    stream = await anthropic_client(server).messages.create(
        model="claude-fake",
        max_tokens=1024,
        messages=USER,
        stream=True,
    )
    events = [event async for event in stream]
    types = [event.type for event in events]
    assert types[0] == "message_start"
    assert types[-2:] == ["message_delta", "message_stop"]
    delta_types = {e.delta.type for e in events if e.type == "content_block_delta"}
    assert delta_types == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    signature = [
        e.delta.signature
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "signature_delta"
    ]
    assert signature == [fake_signature("Both files are needed.")]
    first, message_delta = events[0], events[-2]
    assert first.type == "message_start" and message_delta.type == "message_delta"
    start = first.message
    assert start.usage.input_tokens == 120
    assert start.usage.cache_read_input_tokens == 1000
    assert start.usage.cache_creation_input_tokens == 50
    assert message_delta.delta.stop_reason == "tool_use"
    assert message_delta.usage.output_tokens == 33


async def test_anthropic_stream_helper_assembles_final_message(server: FakeModelServer) -> None:
    server.script(tool_reply(thinking="Both files are needed."))
    async with anthropic_client(server).messages.stream(
        model="claude-fake",
        max_tokens=1024,
        messages=USER,
    ) as stream:
        message = await stream.get_final_message()
    kinds = [block.type for block in message.content]
    assert kinds == ["thinking", "text", "tool_use", "tool_use"]
    thinking, text, first, second = message.content
    assert thinking.type == "thinking"
    assert thinking.thinking == "Both files are needed."
    assert thinking.signature == fake_signature("Both files are needed.")
    assert text.type == "text" and text.text == "Let me look at both files."
    assert first.type == "tool_use" and second.type == "tool_use"
    assert first.id == "call_given"
    assert second.id.startswith("toolu_")
    assert first.input == {"path": "notes/today.md", "limit": 200}
    assert second.input == {"path": "b.txt"}
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens == 33
    assert message.usage.cache_read_input_tokens == 1000


async def test_anthropic_non_streamed_returns_whole_message(server: FakeModelServer) -> None:
    server.script(Reply(text="done", thinking="hm", stop_reason="length"))
    message = await anthropic_client(server).messages.create(
        model="claude-fake",
        max_tokens=5,
        messages=USER,
    )
    assert message.model == "claude-fake"
    assert [block.type for block in message.content] == ["thinking", "text"]
    thinking = message.content[0]
    assert thinking.type == "thinking" and thinking.signature == fake_signature("hm")
    assert message.stop_reason == "max_tokens"
    assert message.usage.input_tokens == 10
    assert message.usage.output_tokens == 5


HOSTED: list[WebSearch | WebFetch] = [
    WebSearch("python news", [("Python", "https://python.org/")]),
    WebFetch("https://python.org/", "Welcome"),
]


async def test_anthropic_hosted_tool_blocks_parse_as_the_sdks_server_tool_types(
    server: FakeModelServer,
) -> None:
    cited = [("https://python.org/", "Python")]
    reply = Reply(text="news", web=HOSTED, citations=cited, stop_reason="pause_turn")
    server.script(reply, reply)
    client = anthropic_client(server)
    whole = await client.messages.create(model="claude-fake", max_tokens=5, messages=USER)
    async with client.messages.stream(model="claude-fake", max_tokens=5, messages=USER) as stream:
        streamed = await stream.get_final_message()
    for message in (whole, streamed):
        kinds = [block.type for block in message.content]
        assert kinds == [
            "server_tool_use",
            "web_search_tool_result",
            "server_tool_use",
            "web_fetch_tool_result",
            "text",
        ]
        search, results, fetch, page, text = message.content
        assert search.type == "server_tool_use" and search.input == {"query": "python news"}
        assert results.type == "web_search_tool_result" and results.tool_use_id == search.id
        assert isinstance(results.content, list) and results.content[0].url == cited[0][0]
        assert fetch.type == "server_tool_use" and fetch.input == {"url": cited[0][0]}
        assert page.type == "web_fetch_tool_result" and page.content.type == "web_fetch_result"
        assert text.type == "text" and text.citations is not None
        assert text.citations[0].type == "web_search_result_location"
        assert message.stop_reason == "pause_turn"
        assert message.usage.server_tool_use is not None
        assert message.usage.server_tool_use.web_search_requests == 1
        assert message.usage.server_tool_use.web_fetch_requests == 1


async def test_responses_web_search_calls_and_citations_parse_as_the_sdks_types(
    server: FakeModelServer,
) -> None:
    cited = [("https://python.org/", "Python")]
    server.script(Reply(text="news", web=HOSTED, citations=cited))
    async with openai_client(server).responses.stream(model="gpt-fake", input="hi") as stream:
        final = await stream.get_final_response()
    search, opened, message = final.output
    assert search.type == "web_search_call" and search.action.type == "search"
    assert search.action.query == "python news"
    assert opened.type == "web_search_call" and opened.action.type == "open_page"
    assert message.type == "message" and message.content[0].type == "output_text"
    (note,) = message.content[0].annotations
    assert note.type == "url_citation" and note.url == cited[0][0]


async def test_anthropic_rejects_two_tools_of_one_name_and_hosted_tools_a_model_lacks(
    server: FakeModelServer,
) -> None:
    client = anthropic_client(server)
    server.no_hosted_tools = {"claude-old"}
    twice: Any = [
        {"name": "web_search", "description": "d", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="Tool names must be unique"):
        await client.messages.create(model="claude-fake", max_tokens=5, messages=USER, tools=twice)
    with pytest.raises(anthropic.BadRequestError, match="not supported for model 'claude-old'"):
        await client.messages.create(
            model="claude-old", max_tokens=5, messages=USER, tools=twice[1:]
        )


async def test_anthropic_raw_stream_contains_ping(server: FakeModelServer) -> None:
    # The SDK hides ping events; read the wire to prove they are sent.
    server.script(Reply(text="hi"))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{server.base_url}/v1/messages",
            json={"model": "m", "max_tokens": 5, "messages": USER, "stream": True},
        ) as resp,
    ):
        raw = await resp.text()
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    assert "event: ping\n" in raw
    assert raw.index("event: message_start") < raw.index("event: ping")


# --- errors ------------------------------------------------------------------


async def test_openai_rate_limit_raises_rate_limit_error_with_retry_after(
    server: FakeModelServer,
) -> None:
    server.script(Fail(429, kind="rate_limit", retry_after=7))
    with pytest.raises(openai.RateLimitError) as info:
        await openai_client(server).chat.completions.create(
            model="gpt-fake",
            messages=USER,
        )
    assert info.value.status_code == 429
    assert info.value.code == "rate_limit_exceeded"
    assert info.value.response.headers["retry-after"] == "7"


async def test_openai_insufficient_quota_is_a_429_with_its_code(server: FakeModelServer) -> None:
    server.script(Fail(429, kind="billing"))
    with pytest.raises(openai.RateLimitError) as info:
        await openai_client(server).responses.create(model="gpt-fake", input="hi")
    assert info.value.code == "insufficient_quota"
    assert info.value.type == "insufficient_quota"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_openai_context_overflow_is_bad_request_with_context_code(
    server: FakeModelServer, api: str
) -> None:
    server.script(Fail(400, kind="context_overflow"), api=api)
    client = openai_client(server)
    with pytest.raises(openai.BadRequestError) as info:
        if api == "chat":
            await client.chat.completions.create(
                model="gpt-fake",
                messages=USER,
                stream=True,
            )
        else:
            await client.responses.create(model="gpt-fake", input="hi", stream=True)
    assert info.value.code == "context_length_exceeded"
    assert "context" in info.value.message


async def test_openai_auth_and_server_errors_map_to_sdk_classes(server: FakeModelServer) -> None:
    server.script(Fail(401, kind="auth"), Fail(500), Fail(503, kind="overloaded"))
    client = openai_client(server, key="sk-proj-abcdefghijkl")
    with pytest.raises(openai.AuthenticationError) as auth:
        await client.chat.completions.create(model="m", messages=USER)
    assert auth.value.code == "invalid_api_key"
    assert "sk-proj-abcdefghijkl" not in auth.value.message
    with pytest.raises(openai.InternalServerError) as generic:
        await client.chat.completions.create(model="m", messages=USER)
    assert generic.value.status_code == 500
    with pytest.raises(openai.InternalServerError) as overloaded:
        await client.responses.create(model="m", input="hi")
    assert overloaded.value.status_code == 503


async def test_anthropic_overloaded_is_529_internal_server_error(server: FakeModelServer) -> None:
    server.script(Fail(529, kind="overloaded"))
    with pytest.raises(anthropic.InternalServerError) as info:
        await anthropic_client(server).messages.create(
            model="claude-fake",
            max_tokens=5,
            messages=USER,
            stream=True,
        )
    assert isinstance(info.value, anthropic.APIStatusError)
    assert info.value.status_code == 529
    assert info.value.type == "overloaded_error"
    assert info.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": info.value.request_id,
    }


async def test_anthropic_context_overflow_is_bad_request_prompt_too_long(
    server: FakeModelServer,
) -> None:
    server.script(Fail(400, kind="context_overflow"))
    with pytest.raises(anthropic.BadRequestError) as info:
        await anthropic_client(server).messages.create(
            model="claude-fake",
            max_tokens=5,
            messages=USER,
        )
    assert info.value.type == "invalid_request_error"
    assert info.value.api_message is not None
    assert info.value.api_message.startswith("prompt is too long: ")


async def test_anthropic_auth_rate_limit_and_billing_map_to_sdk_classes(
    server: FakeModelServer,
) -> None:
    server.script(
        Fail(401, kind="auth"),
        Fail(429, kind="rate_limit", retry_after=1.5),
        Fail(402, kind="billing", message="custom billing text"),
        api="anthropic",
    )
    client = anthropic_client(server)

    async def call() -> None:
        await client.messages.create(
            model="claude-fake",
            max_tokens=5,
            messages=USER,
        )

    with pytest.raises(anthropic.AuthenticationError) as auth:
        await call()
    assert auth.value.type == "authentication_error"
    with pytest.raises(anthropic.RateLimitError) as limited:
        await call()
    assert limited.value.type == "rate_limit_error"
    assert limited.value.response.headers["retry-after"] == "1.5"
    with pytest.raises(anthropic.APIStatusError) as billing:
        await call()
    assert billing.value.status_code == 402
    assert billing.value.type == "billing_error"
    assert billing.value.api_message == "custom billing text"


async def test_empty_queue_answers_500_naming_the_missing_script(server: FakeModelServer) -> None:
    with pytest.raises(openai.InternalServerError) as oa:
        await openai_client(server).chat.completions.create(
            model="m",
            messages=USER,
        )
    assert NO_SCRIPT_MESSAGE in str(oa.value)
    with pytest.raises(anthropic.InternalServerError) as an:
        await anthropic_client(server).messages.create(
            model="m",
            max_tokens=5,
            messages=USER,
        )
    assert NO_SCRIPT_MESSAGE in str(an.value)


async def test_malformed_request_is_rejected_without_consuming_the_script(
    server: FakeModelServer,
) -> None:
    server.script(Reply(text="kept"))
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{server.base_url}/v1/messages", json={"model": "m", "messages": USER}
        ) as resp:
            body = await resp.json()
        assert resp.status == 400
        assert body["error"] == {
            "type": "invalid_request_error",
            "message": "max_tokens: Field required",
        }
        async with session.post(
            f"{server.base_url}/v1/chat/completions", data=b"{not json"
        ) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["type"] == "invalid_request_error"
    assert server.pending() == 1
    assert [r.json for r in server.requests] == [{"model": "m", "messages": USER}, None]


# --- dropped connections -----------------------------------------------------


async def test_chat_drop_raises_connection_error_after_some_deltas(
    server: FakeModelServer,
) -> None:
    server.script(Drop(Reply(text="abcdefghijklmnopqrstuvwxyz", chunk_size=4), after_chunks=3))
    stream = await openai_client(server).chat.completions.create(
        model="m",
        messages=USER,
        stream=True,
        stream_options={"include_usage": True},
    )
    received: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            for choice in chunk.choices:
                assert choice.finish_reason is None
                if choice.delta.content:
                    received.append(choice.delta.content)
    assert received == ["abcd", "efgh", "ijkl"]


async def test_responses_drop_raises_connection_error_mid_tool_arguments(
    server: FakeModelServer,
) -> None:
    reply = Reply(tool_calls=[ToolCall("write", {"path": "x", "content": "y" * 40})])
    server.script(Drop(reply, after_chunks=2))
    stream = await openai_client(server).responses.create(model="m", input="hi", stream=True)
    types: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        async for event in stream:
            types.append(event.type)
    assert types.count("response.function_call_arguments.delta") == 2
    assert "response.completed" not in types


async def test_anthropic_drop_raises_protocol_error_mid_stream(server: FakeModelServer) -> None:
    server.script(Drop(Reply(thinking="a long chain of thought", chunk_size=5), after_chunks=2))
    stream = await anthropic_client(server).messages.create(
        model="m",
        max_tokens=5,
        messages=USER,
        stream=True,
    )
    deltas: list[str] = []
    # anthropic 2.14 lets httpx2's protocol error escape its stream iterator
    # instead of wrapping it in APIConnectionError; adapters must catch both.
    with pytest.raises((anthropic.APIConnectionError, httpx2.TransportError)):
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "thinking_delta":
                deltas.append(event.delta.thinking)
            assert event.type != "message_stop"
    assert deltas == ["a lon", "g cha"]


async def test_non_streamed_drop_cuts_the_body(server: FakeModelServer) -> None:
    server.script(Drop(Reply(text="whole answer")))
    with pytest.raises(anthropic.APIConnectionError):
        await anthropic_client(server).messages.create(
            model="m",
            max_tokens=5,
            messages=USER,
        )


# --- queues, recording, hooks ------------------------------------------------


async def test_per_api_queue_goes_first_and_shared_queue_serves_any_api(
    server: FakeModelServer,
) -> None:
    server.script(Reply(text="shared-1"), Reply(text="shared-2"))
    server.script(Reply(text="for-anthropic"), api="anthropic")
    oa = openai_client(server)
    an = anthropic_client(server)

    message = await an.messages.create(
        model="m",
        max_tokens=5,
        messages=USER,
    )
    completion = await oa.chat.completions.create(
        model="m",
        messages=USER,
    )
    response = await oa.responses.create(model="m", input="hi")

    text = message.content[0]
    assert text.type == "text" and text.text == "for-anthropic"
    assert completion.choices[0].message.content == "shared-1"
    assert response.output_text == "shared-2"
    assert server.pending() == 0 and server.pending("anthropic") == 0


def test_script_rejects_unknown_api_and_bad_items() -> None:
    server = FakeModelServer()
    with pytest.raises(ValueError, match="unknown api 'bard'"):
        server.script(Reply(), api="bard")
    with pytest.raises(TypeError, match="expected Reply, Fail or Drop"):
        server.script("hello")  # type: ignore[arg-type]  # a value the types forbid, on purpose
    with pytest.raises(ValueError, match="chunk_size"):
        Reply(chunk_size=0)
    with pytest.raises(ValueError, match="status"):
        Fail(200)


async def test_requests_record_api_path_body_and_key(server: FakeModelServer) -> None:
    server.script(Reply(), Reply(), Reply())
    await openai_client(server, key="key-one").chat.completions.create(
        model="gpt-a",
        messages=USER,
    )
    await openai_client(server, key="key-two").responses.create(model="gpt-b", input="x")
    await anthropic_client(server, key="key-three").messages.create(
        model="claude-c",
        max_tokens=5,
        messages=USER,
    )
    recorded = server.requests
    assert [(r.api, r.path, r.api_key) for r in recorded] == [
        ("chat", "/v1/chat/completions", "key-one"),
        ("responses", "/v1/responses", "key-two"),
        ("anthropic", "/v1/messages", "key-three"),
    ]
    assert recorded[0].headers["authorization"] == "Bearer key-one"
    # anthropic 2.14 sends its api_key as a Bearer token, not x-api-key.
    assert recorded[2].headers["authorization"] == "Bearer key-three"
    assert [r.json["model"] for r in recorded] == ["gpt-a", "gpt-b", "claude-c"]
    assert not any(r.stream for r in recorded)
    assert recorded[0].time <= recorded[1].time <= recorded[2].time


async def test_on_chunk_fires_once_per_streamed_event(server: FakeModelServer) -> None:
    stamps: list[float] = []
    server.on_chunk = stamps.append
    server.script(Reply(text="0123456789", chunk_size=5))
    stream = await openai_client(server).chat.completions.create(
        model="m",
        messages=USER,
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    # role chunk + two text chunks + finish chunk, then the [DONE] line.
    assert len(chunks) == 4
    assert len(stamps) == 5
    assert stamps == sorted(stamps)
    assert stamps[0] >= server.requests[0].time


async def test_models_list_speaks_both_shapes(server: FakeModelServer) -> None:
    server.models = ["gpt-fake", "claude-fake"]
    openai_models = [m.id async for m in openai_client(server).models.list()]
    anthropic_models = [m.id async for m in anthropic_client(server).models.list()]
    assert openai_models == ["gpt-fake", "claude-fake"]
    assert anthropic_models == ["gpt-fake", "claude-fake"]
    assert [r.api for r in server.requests] == ["models", "models"]


def test_api_key_is_read_from_x_api_key_or_bearer() -> None:
    def recorded(headers: dict[str, str]) -> RecordedRequest:
        return RecordedRequest(
            api="anthropic", path="/v1/messages", headers=headers, json={}, time=0
        )

    assert recorded({"x-api-key": "raw"}).api_key == "raw"
    assert recorded({"authorization": "Bearer tok"}).api_key == "tok"
    assert recorded({"authorization": "Basic abc"}).api_key is None
    assert recorded({}).api_key is None


# -- embeddings ---------------------------------------------------------------------------


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_embeddings_answer_base64_by_default_as_the_sdk_asks(
    server: FakeModelServer,
) -> None:
    result = await openai_client(server).embeddings.create(
        model="embed-fake", input=["coffee with oat milk", "coffee with sugar", "train times"]
    )
    assert server.embedding_requests[0].json["encoding_format"] == "base64"
    assert [item.index for item in result.data] == [0, 1, 2]
    assert result.model == "embed-fake"
    assert result.usage.total_tokens == result.usage.prompt_tokens > 0
    vectors = [item.embedding for item in result.data]
    assert all(len(v) == 256 for v in vectors)
    assert abs(_cosine(vectors[0], vectors[0]) - 1.0) < 1e-5
    # Texts that share words are closer than texts that share none.
    assert _cosine(vectors[0], vectors[1]) > _cosine(vectors[0], vectors[2])


async def test_embeddings_float_format_and_dimensions(server: FakeModelServer) -> None:
    result = await openai_client(server).embeddings.create(
        model="embed-fake", input="one text", encoding_format="float", dimensions=16
    )
    assert isinstance(result.data[0].embedding, list)
    assert len(result.data[0].embedding) == 16


async def test_embeddings_same_meaning_words_embed_alike(server: FakeModelServer) -> None:
    server.same_meaning("car", "automobile")
    result = await openai_client(server).embeddings.create(
        model="embed-fake", input=["car", "automobile", "banana"]
    )
    car, automobile, banana = (item.embedding for item in result.data)
    assert _cosine(car, automobile) > 0.99
    assert abs(_cosine(car, banana)) < 0.99


async def test_embeddings_models_have_their_own_spaces(server: FakeModelServer) -> None:
    client = openai_client(server)
    one = await client.embeddings.create(model="embed-a", input="coffee preference")
    two = await client.embeddings.create(model="embed-b", input="coffee preference")
    assert one.data[0].embedding != two.data[0].embedding


async def test_embeddings_scripted_failures_raise_the_sdks_errors_then_recover(
    server: FakeModelServer,
) -> None:
    server.fail_embeddings(Fail(500), Fail(429, retry_after=2))
    # A chat reply queued meanwhile is not taken by an embedding request.
    server.script(Reply(text="hi"))
    client = openai_client(server)
    with pytest.raises(openai.InternalServerError):
        await client.embeddings.create(model="embed-fake", input="x")
    with pytest.raises(openai.RateLimitError):
        await client.embeddings.create(model="embed-fake", input="x")
    result = await client.embeddings.create(model="embed-fake", input="x")
    assert len(result.data) == 1
    assert len(server.embedding_requests) == 3
    assert server.pending() == 1


async def test_embeddings_reject_an_empty_input_with_a_400(server: FakeModelServer) -> None:
    with pytest.raises(openai.BadRequestError, match="input"):
        await openai_client(server).embeddings.create(model="embed-fake", input=[""])


# --- conversation shapes (wire_shapes.py) -------------------------------------

PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
ANTHROPIC_IMAGE: Any = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX},
}
ANTHROPIC_CALL: Any = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "view_image", "input": {}}],
}
CHAT_CALL: Any = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "view_image", "arguments": "{}"}}
    ],
}
CHAT_IMAGE: Any = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1PX}"}}


async def anthropic_refusal(server: FakeModelServer, messages: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await anthropic_client(server).messages.create(
            model="claude-fake", max_tokens=100, messages=messages
        )
    return str(caught.value)


async def chat_refusal(server: FakeModelServer, messages: Any, model: str = "gpt-fake") -> str:
    with pytest.raises(openai.BadRequestError) as caught:
        await openai_client(server).chat.completions.create(model=model, messages=messages)
    return str(caught.value)


async def test_anthropic_refuses_an_image_before_the_tool_result(
    server: FakeModelServer,
) -> None:
    server.script(Reply(text="kept"))
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    wrong = [USER[0], ANTHROPIC_CALL, {"role": "user", "content": [ANTHROPIC_IMAGE, result]}]
    assert "tool_result blocks must come before" in await anthropic_refusal(server, wrong)
    missing = [USER[0], ANTHROPIC_CALL, {"role": "user", "content": [ANTHROPIC_IMAGE]}]
    assert "without `tool_result` blocks" in await anthropic_refusal(server, missing)
    liar = dict(ANTHROPIC_IMAGE, source=dict(ANTHROPIC_IMAGE["source"], media_type="image/jpeg"))
    assert "appears to be a image/png" in await anthropic_refusal(
        server, [{"role": "user", "content": [liar]}]
    )
    right = [USER[0], ANTHROPIC_CALL, {"role": "user", "content": [result, ANTHROPIC_IMAGE]}]
    reply = await anthropic_client(server).messages.create(
        model="claude-fake", max_tokens=100, messages=right
    )
    assert reply.content[0].type == "text"


async def test_chat_refuses_an_image_in_a_tool_message_or_between_calls_and_results(
    server: FakeModelServer,
) -> None:
    server.script(Reply(text="kept"))
    in_tool = [
        USER[0],
        CHAT_CALL,
        {"role": "tool", "tool_call_id": "call_1", "content": [CHAT_IMAGE]},
    ]
    assert "only allowed for messages with role 'user'" in await chat_refusal(server, in_tool)
    between = [
        USER[0],
        CHAT_CALL,
        {"role": "user", "content": [CHAT_IMAGE]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    assert "must be followed by tool messages" in await chat_refusal(server, between)
    right = [
        USER[0],
        CHAT_CALL,
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "user", "content": [CHAT_IMAGE]},
    ]
    reply = await openai_client(server).chat.completions.create(model="gpt-fake", messages=right)
    assert reply.choices[0].message.content == "kept"


async def test_responses_refuses_a_message_before_the_call_output(
    server: FakeModelServer,
) -> None:
    call: Any = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "view_image",
        "arguments": "{}",
    }
    image: Any = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{PNG_1PX}"}],
    }
    output: Any = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
    with pytest.raises(openai.BadRequestError, match="No tool output found for function call"):
        await openai_client(server).responses.create(model="gpt-fake", input=[call, image, output])
    server.script(Reply(text="kept"))
    reply = await openai_client(server).responses.create(
        model="gpt-fake", input=[call, output, image]
    )
    assert reply.output_text == "kept"


async def test_a_blind_model_refuses_images_in_each_apis_words(server: FakeModelServer) -> None:
    server.blind_models.update({"gpt-fake", "claude-fake"})
    server.script(Reply(text="kept"))
    picture = [{"role": "user", "content": [CHAT_IMAGE]}]
    assert "image_url is only supported by certain models" in await chat_refusal(server, picture)
    assert "does not support image input" in await anthropic_refusal(
        server, [{"role": "user", "content": [ANTHROPIC_IMAGE]}]
    )
    assert server.pending() == 1  # a refusal takes no scripted reply
