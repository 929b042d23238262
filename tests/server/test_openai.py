"""The real openai client against /v1: models, whole and streamed answers, continuation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from habakkuk.engine.llm.types import ContextBlock
from tests.conftest import mock_config

SCRIPT = """
- match: "tool"
  steps:
    - text: "Before the tool."
      tool_calls: [{name: list_dir, arguments: {path: "."}}]
    - text: "After the tool."
- match: "risky"
  steps:
    - tool_calls: [{name: exec, arguments: {command: "echo should-not-run"}}]
    - text: "Could not run it."
- steps:
    - text: "Echo: {input}"
"""


@pytest.fixture
async def api(serve: Any) -> AsyncIterator[tuple[Any, openai.AsyncOpenAI]]:
    served = await serve(mock_config(SCRIPT, mode="ask"))
    client = openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=served.token, max_retries=0)
    yield served, client
    await client.close()


async def test_models_lists_one_model_per_agent(api: Any) -> None:
    _, client = api
    models = await client.models.list()
    assert [m.id for m in models.data] == ["habakkuk/main"]
    assert models.data[0].owned_by == "habakkuk"


async def test_a_wrong_token_is_an_authentication_error(api: Any) -> None:
    served, _ = api
    async with openai.AsyncOpenAI(
        base_url=f"{served.url}/v1", api_key="wrong", max_retries=0
    ) as bad:
        with pytest.raises(openai.AuthenticationError):
            await bad.models.list()
        with pytest.raises(openai.AuthenticationError):
            await bad.chat.completions.create(
                model="habakkuk/main", messages=[{"role": "user", "content": "hi"}]
            )


async def test_a_whole_chat_completion_runs_a_turn_in_a_fresh_seeded_session(api: Any) -> None:
    served, client = api
    raw = await client.chat.completions.with_raw_response.create(
        model="habakkuk/main",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "earlier question"},
            {"role": "assistant", "content": "earlier answer"},
            {"role": "user", "content": [{"type": "text", "text": "hello there"}]},
        ],
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Echo: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    session = raw.headers["X-Habakkuk-Session"]
    messages = await served.runtime.sessions.messages(session)
    texts = [(m.role, m.message.text) for m in messages]
    # The system message rides as a context block before the user's own words.
    note = messages[0].message.blocks[0]
    assert isinstance(note, ContextBlock) and note.kind == "client" and "Be brief." in note.text
    assert texts[0] == ("user", "earlier question")
    assert texts[1] == ("assistant", "earlier answer")
    assert texts[2][0] == "user" and texts[2][1].startswith("hello there")
    assert texts[3] == ("assistant", "Echo: hello there")


async def test_a_streamed_chat_completion_sends_text_as_it_arrives(api: Any) -> None:
    _, client = api
    stream = await client.chat.completions.create(
        model="habakkuk/main",
        messages=[{"role": "user", "content": "use a tool"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, finish, usage = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "Before the tool.\n\nAfter the tool."
    assert len(pieces) > 2
    assert finish == "stop"
    assert usage is not None and usage.total_tokens > 0


async def test_a_whole_answer_joins_the_texts_around_tool_calls_like_the_stream(
    api: Any,
) -> None:
    _, client = api
    completion = await client.chat.completions.create(
        model="habakkuk/main", messages=[{"role": "user", "content": "use a tool"}]
    )
    assert completion.choices[0].message.content == "Before the tool.\n\nAfter the tool."
    response = await client.responses.create(model="habakkuk/main", input="use a tool")
    assert response.output_text == "Before the tool.\n\nAfter the tool."


async def test_a_whole_answer_on_a_continued_session_is_only_that_turns_text(
    api: Any,
) -> None:
    _, client = api
    first = await client.chat.completions.create(
        model="habakkuk/main", messages=[{"role": "user", "content": "use a tool"}], user="carol"
    )
    assert first.choices[0].message.content == "Before the tool.\n\nAfter the tool."
    second = await client.chat.completions.create(
        model="habakkuk/main", messages=[{"role": "user", "content": "hello"}], user="carol"
    )
    assert second.choices[0].message.content == "Echo: hello"


async def test_the_session_header_and_the_user_field_continue_a_session(api: Any) -> None:
    served, client = api
    first = await client.chat.completions.with_raw_response.create(
        model="habakkuk/main", messages=[{"role": "user", "content": "one"}], user="alice"
    )
    session = first.headers["X-Habakkuk-Session"]
    second = await client.chat.completions.with_raw_response.create(
        model="habakkuk/main",
        messages=[{"role": "user", "content": "ignored"}, {"role": "user", "content": "two"}],
        user="alice",
    )
    assert second.headers["X-Habakkuk-Session"] == session
    third = await client.chat.completions.with_raw_response.create(
        model="habakkuk/main",
        messages=[{"role": "user", "content": "three"}],
        extra_headers={"X-Habakkuk-Session": session},
    )
    assert third.headers["X-Habakkuk-Session"] == session
    stored = await served.runtime.sessions.messages(session)
    users = [m.message.blocks[0].text for m in stored if m.role == "user"]
    assert users == ["one", "two", "three"]
    other = await client.chat.completions.with_raw_response.create(
        model="habakkuk/main", messages=[{"role": "user", "content": "x"}], user="bob"
    )
    assert other.headers["X-Habakkuk-Session"] != session
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(
            model="habakkuk/main",
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"X-Habakkuk-Session": "ses_missing"},
        )


async def test_the_same_idempotency_key_attaches_to_the_first_turn(api: Any) -> None:
    served, client = api
    headers = {"Idempotency-Key": "retry-key-1"}
    request = {
        "model": "habakkuk/main",
        "messages": [{"role": "user", "content": "only once"}],
        "extra_headers": headers,
    }
    first, second = await asyncio.gather(
        client.chat.completions.with_raw_response.create(**request),
        client.chat.completions.with_raw_response.create(**request),
    )
    assert first.parse().id == second.parse().id
    session = first.headers["X-Habakkuk-Session"]
    assert second.headers["X-Habakkuk-Session"] == session
    roles = [m.role for m in await served.runtime.sessions.messages(session)]
    assert roles == ["user", "assistant"]


async def test_requests_with_tools_or_an_unknown_model_are_refused(api: Any) -> None:
    _, client = api
    with pytest.raises(openai.BadRequestError, match="tools"):
        await client.chat.completions.create(
            model="habakkuk/main",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        )
    with pytest.raises(openai.NotFoundError, match="ghost"):
        await client.chat.completions.create(
            model="habakkuk/ghost", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.BadRequestError, match="last message"):
        await client.chat.completions.create(
            model="habakkuk/main", messages=[{"role": "assistant", "content": "hi"}]
        )


async def test_calls_that_need_approval_are_denied(api: Any) -> None:
    served, client = api
    raw = await client.chat.completions.with_raw_response.create(
        model="habakkuk/main", messages=[{"role": "user", "content": "risky"}]
    )
    assert raw.parse().choices[0].message.content == "Could not run it."
    assert served.runtime.approvals.pending == []
    messages = await served.runtime.sessions.messages(raw.headers["X-Habakkuk-Session"])
    [result] = [r for m in messages for r in m.message.tool_results]
    assert result.is_error
    assert "should-not-run" not in result.text


async def test_a_whole_response_and_previous_response_id(api: Any) -> None:
    served, client = api
    first = await client.responses.create(
        model="habakkuk/main", input="first question", instructions="Answer plainly."
    )
    assert first.status == "completed"
    assert first.output_text == "Echo: first question"
    assert first.id.startswith("resp_")
    second = await client.responses.with_raw_response.create(
        model="habakkuk/main", input="follow up", previous_response_id=first.id
    )
    parsed = second.parse()
    assert parsed.output_text == "Echo: follow up"
    assert parsed.previous_response_id == first.id
    session = second.headers["X-Habakkuk-Session"]
    stored = await served.runtime.sessions.messages(session)
    texts = [m.message.text for m in stored]
    assert "Answer plainly." in stored[0].message.blocks[0].text
    assert any(t.startswith("first question") for t in texts)
    with pytest.raises(openai.NotFoundError):
        await client.responses.create(
            model="habakkuk/main", input="x", previous_response_id="resp_missing"
        )


async def test_a_streamed_response_has_the_real_event_shapes(api: Any) -> None:
    _, client = api
    stream = await client.responses.create(
        model="habakkuk/main",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "stream me"}]}],
        stream=True,
    )
    kinds, deltas, final = [], [], None
    async for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        if event.type == "response.completed":
            final = event.response
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "response.output_item.added" in kinds
    assert "response.output_text.done" in kinds
    assert "".join(deltas) == "Echo: stream me"
    assert final is not None and final.output_text == "Echo: stream me"
    numbers = []
    async with client.responses.stream(model="habakkuk/main", input="helper") as helper:
        async for event in helper:
            numbers.append(event.sequence_number)
        done = await helper.get_final_response()
    assert done.output_text == "Echo: helper"
    assert numbers == sorted(numbers)
