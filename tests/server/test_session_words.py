"""Sessions show the user's words: the dashboard's session JSON and search leave out the
time sent with each message, and /v1 sessions are titled by the user, not the client."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from tests.conftest import mock_config

SCRIPT = """
- steps:
    - text: "Echo: {input}"
"""


async def test_the_session_json_and_search_leave_out_the_time_sent_with_each_message(
    serve: Any,
) -> None:
    served = await serve(mock_config(SCRIPT))
    with served.runtime.bus.subscribe(lambda e: e.kind == "job.finished") as finished:
        sent = await served.post_json("/api/chat", {"conversation": "w1", "text": "the heron"})
        while (await asyncio.wait_for(finished.get(), 30)).data["job"] != sent["turn"]:
            pass
    one = await served.get_json(f"/api/sessions/{sent['session']}")
    assert one["session"]["title"] == "the heron"
    assert one["messages"][0]["blocks"] == [
        {"type": "text", "text": "the heron"},
        {"type": "context", "kind": "time"},
    ]
    assert (await served.get_json("/api/sessions?q=current"))["hits"] == []
    hits = (await served.get_json("/api/sessions?q=heron"))["hits"]
    assert sorted((h["role"], h["snippet"]) for h in hits) == [
        ("assistant", "Echo: the [heron]"),
        ("user", "the [heron]"),
    ]


async def test_a_v1_session_is_titled_by_the_users_words_not_the_clients_messages(
    serve: Any,
) -> None:
    served = await serve(mock_config(SCRIPT))
    async with openai.AsyncOpenAI(
        base_url=f"{served.url}/v1", api_key=served.token, max_retries=0
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="habakkuk/main",
            messages=[
                {"role": "system", "content": "You are a terse assistant in SomeEditor."},
                {"role": "developer", "content": "Answer in English."},
                {"role": "user", "content": "why do cats purr"},
            ],
        )
        assert raw.parse().choices[0].message.content == "Echo: why do cats purr"
        session = raw.headers["X-Habakkuk-Session"]
        assert (await served.runtime.sessions.session(session)).title == "why do cats purr"
        # Earlier turns in the request: the first of the user's own words.
        raw = await client.chat.completions.with_raw_response.create(
            model="habakkuk/main",
            messages=[
                {"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "first thing\nwith a second line"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "second thing"},
            ],
        )
        second = raw.headers["X-Habakkuk-Session"]
        assert (await served.runtime.sessions.session(second)).title == "first thing"
        response = await client.responses.with_raw_response.create(
            model="habakkuk/main", input="tell me of owls", instructions="Be kind."
        )
        third = response.headers["X-Habakkuk-Session"]
        assert (await served.runtime.sessions.session(third)).title == "tell me of owls"
    # The client's boilerplate is not the user's words to search.
    assert await served.runtime.sessions.search_sessions("SomeEditor") == []
    exported = await served.runtime.sessions.export_session(session, "md")
    assert "You are a terse assistant in SomeEditor." in exported  # shown, as the client's
