"""Transcripts: append-only storage, repair on load, full-text search, export."""

from __future__ import annotations

import json

import pytest

from habakkuk.engine.export import export_transcript
from habakkuk.engine.llm.types import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from habakkuk.engine.sessions import INTERRUPTED, TranscriptStore, repair


@pytest.fixture
def store(transcripts_on: TranscriptStore) -> TranscriptStore:
    """The transcripts on each engine: these tests are the store's contract on both."""
    return transcripts_on


def call(id_: str, tool: str = "exec") -> ToolUseBlock:
    return ToolUseBlock(id_, tool, {"command": "true"})


def test_repair_gives_a_missing_result_an_interrupted_error() -> None:
    messages = [
        Message.user_text("go"),
        Message("assistant", [call("a"), call("b")]),
        Message("user", [ToolResultBlock("a", "ok")]),
        Message("assistant", [TextBlock("done")]),
    ]
    fixed = repair(messages)
    results = fixed.messages[2].tool_results
    assert [(r.tool_use_id, r.is_error) for r in results] == [("a", False), ("b", True)]
    assert results[1].text == INTERRUPTED
    assert fixed.interrupted == []


def test_repair_reports_calls_left_without_results_at_the_end() -> None:
    messages = [Message.user_text("go"), Message("assistant", [call("a")])]
    fixed = repair(messages)
    assert [c.tool_use_id for c in fixed.interrupted] == ["a"]
    assert fixed.messages[-1].tool_results[0].is_error


def test_repair_drops_results_nobody_asked_for() -> None:
    messages = [
        Message.user_text("go"),
        Message("user", [ToolResultBlock("ghost", "?"), TextBlock("hello")]),
        Message("assistant", [call("a")]),
        Message("user", [ToolResultBlock("a", "ok"), ToolResultBlock("stray", "??")]),
    ]
    fixed = repair(messages)
    assert fixed.dropped_results == 2
    assert fixed.messages[1].blocks == [TextBlock("hello")]
    assert [r.tool_use_id for r in fixed.messages[3].tool_results] == ["a"]


def test_repair_inserts_results_for_a_call_followed_by_a_user_message() -> None:
    messages = [
        Message.user_text("go"),
        Message("assistant", [call("a")]),
        Message.user_text("are you there?"),
    ]
    fixed = repair(messages)
    roles = [m.role for m in fixed.messages]
    assert roles == ["user", "assistant", "user", "user"]
    assert fixed.messages[2].tool_results[0].tool_use_id == "a"


async def test_append_is_ordered_and_sets_a_first_message_title(store: TranscriptStore) -> None:
    await store.create_session("s1", "main", "SYSTEM")
    assert await store.append("s1", Message.user_text("Plan my week\nplease")) == 0
    assert await store.append("s1", Message("assistant", [TextBlock("Sure.")])) == 1
    session = await store.get_session("s1")
    assert session is not None
    assert session.title == "Plan my week" and session.system_prompt == "SYSTEM"
    stored = await store.messages("s1")
    assert [(m.seq, m.role, m.message.text) for m in stored] == [
        (0, "user", "Plan my week\nplease"),
        (1, "assistant", "Sure."),
    ]


async def test_create_session_keeps_the_first_frozen_prompt(store: TranscriptStore) -> None:
    await store.create_session("s1", "main", "first prompt")
    again = await store.create_session("s1", "main", "second prompt")
    assert again.system_prompt == "first prompt"


async def test_user_message_of_a_turn_is_appended_once(store: TranscriptStore) -> None:
    await store.create_session("s1", "main", "")
    first = await store.append("s1", Message.user_text("hi"), turn_id="t1", unless_turn_has="user")
    again = await store.append("s1", Message.user_text("hi"), turn_id="t1", unless_turn_has="user")
    assert first == 0 and again is None
    assert len(await store.messages("s1")) == 1


async def test_search_finds_user_and_assistant_text_but_not_tool_output(
    store: TranscriptStore,
) -> None:
    await store.create_session("s1", "main", "")
    await store.create_session("s2", "other", "")
    await store.append("s1", Message.user_text("the quarterly budget spreadsheet"))
    await store.append("s1", Message("assistant", [call("x")]))
    await store.append("s1", Message("user", [ToolResultBlock("x", "budget in tool output")]))
    await store.append("s2", Message("assistant", [TextBlock("your budget is fine")]))
    hits = await store.search("budget")
    assert {(h.session, h.seq) for h in hits} == {("s1", 0), ("s2", 0)}
    assert any("[budget]" in h.snippet for h in hits)
    only_other = await store.search("budget", agent="other")
    assert [h.session for h in only_other] == ["s2"]


async def test_search_treats_query_syntax_as_plain_words(store: TranscriptStore) -> None:
    await store.create_session("s1", "main", "")
    await store.append("s1", Message.user_text('he said "NEAR" OR AND'))
    assert await store.search('"NEAR" OR AND(') != []
    assert await store.search("") == []


async def test_a_corrupt_message_row_is_skipped_not_fatal(store: TranscriptStore) -> None:
    await store.create_session("s1", "main", "")
    await store.append("s1", Message.user_text("fine"))
    await store.append("s1", Message("assistant", [TextBlock("will be damaged")]))
    await store.db.write(
        lambda c: c.execute("UPDATE messages SET blocks = '{not json' WHERE seq = 1")
    )
    await store.append("s1", Message("assistant", [TextBlock("still here")]))
    texts = [m.message.text for m in await store.messages("s1")]
    assert texts == ["fine", "still here"]


async def test_export_formats(store: TranscriptStore) -> None:
    await store.create_session("s1", "main", "")
    await store.append("s1", Message.user_text("<script>alert(1)</script>"))
    await store.append("s1", Message("assistant", [call("x")]))
    await store.append("s1", Message("user", [ToolResultBlock("x", "out", is_error=True)]))
    session = await store.get_session("s1")
    assert session is not None
    stored = await store.messages("s1")
    data = json.loads(export_transcript(session, stored, "json"))
    assert data["session"]["id"] == "s1" and data["session"]["agent"] == "main"
    assert data["messages"][1]["blocks"] == [
        {"type": "tool_use", "tool_use_id": "x", "tool": "exec", "input": {"command": "true"}}
    ]
    assert data["messages"][2]["blocks"][0] == {
        "type": "tool_result",
        "tool_use_id": "x",
        "text": "out",
        "is_error": True,
    }
    page = export_transcript(session, stored, "html")
    assert "<script>" not in page and "&lt;script&gt;" in page
    markdown = export_transcript(session, stored, "md")
    assert "**tool call** `exec`" in markdown and "**tool error**" in markdown
