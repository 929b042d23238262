"""The runtime facade methods the terminal app relies on, without the app."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from habakkuk.engine.toolkit.registry import ToolError
from habakkuk.tools.clarify import NO_ASKER, ClarifyRequest, Question
from tests.conftest import mock_config


async def test_sessions_can_be_renamed_archived_searched_and_exported(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config())
    session = await runtime.sessions.new_session(None, origin="test", session_id="ses_facade")
    call = ToolUseBlock("call_9", "exec", {"command": "ls"})
    await runtime.sessions.seed_session(
        session.id,
        [
            Message("user", [TextBlock("find the otter")]),
            Message("assistant", [call]),
            Message("user", [ToolResultBlock("call_9", "full output", False)]),
        ],
    )
    assert (await runtime.sessions.rename_session(session.id, "  Otters ")).title == "Otters"
    hits = await runtime.sessions.search_sessions("otter")
    assert [h.session for h in hits] == ["ses_facade"]
    assert "find the otter" in await runtime.sessions.export_session(session.id, "md")
    with pytest.raises(ValueError, match="unknown export format"):
        await runtime.sessions.export_session(session.id, "pdf")
    result = await runtime.sessions.tool_output(session.id, "call_9")
    assert result is not None and result.text == "full output"
    assert await runtime.sessions.tool_output(session.id, "call_missing") is None
    await runtime.sessions.archive_session(session.id)
    assert await runtime.sessions.list_sessions() == []
    assert await runtime.sessions.active_turns(session.id) == []
    assert await runtime.control.channel_health() == {}
    assert runtime.turns.running_jobs() == []


async def test_questions_fail_fast_without_an_attached_asker(runtime_factory: Any) -> None:
    hub = (await runtime_factory(mock_config())).approvals
    hub.attach()  # attending, but not taking questions (the dashboard)
    request = ClarifyRequest("main", "ses_1", "turn_1", [Question("Which?", ["x", "y"])])
    with pytest.raises(ToolError) as info:
        await hub.ask(request)
    assert str(info.value) == NO_ASKER


async def test_an_attached_asker_gets_the_question_and_its_answer_returns(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config())
    bus, hub = runtime.bus, runtime.approvals
    hub.attach(questions=True)
    request = ClarifyRequest("main", "ses_1", "turn_1", [Question("Which?", ["x", "y"])])
    with bus.subscribe() as events:
        asked = asyncio.create_task(hub.ask(request))
        pending = await asyncio.wait_for(events.get(), 5)
        assert pending.kind == "question.pending" and hub.questions == [request]
        assert hub.answer_question(pending.data["id"], "a")
        assert await asyncio.wait_for(asked, 5) == "a"
        answered = await asyncio.wait_for(events.get(), 5)
    assert answered.kind == "question.answered"
    assert not hub.answer_question(pending.data["id"], "again")
    assert hub.questions == []


async def test_attendance_is_counted_so_one_client_leaving_keeps_the_other_attending(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config())
    approvals = runtime.approvals
    assert not approvals.attending
    with approvals.attach(questions=True):  # the terminal
        server = await runtime.http.start("127.0.0.1:0")  # the dashboard attends too
        assert server is not None and approvals.attending
        await runtime.http.stop()
        assert approvals.attending  # the terminal is still here
    assert not approvals.attending
    terminal = approvals.attach()
    terminal.release()
    terminal.release()  # a second release does not count another client out
    assert not approvals.attending
