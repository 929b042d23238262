"""Background children and /subagents, through the web chat (POST /api/chat): the notice
turn in the parent session carries the report and answers in the chat that delegated."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.llm.types import TextBlock
from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import eventually
from tests.server.conftest import serve  # noqa: F401  (the fixture)
from tests.work.delegation_env import config, delegate, tool_results

CONVERSATION = "w1"


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


async def chat(served: Any, text: str) -> Any:
    return await served.post_json("/api/chat", {"conversation": CONVERSATION, "text": text})


async def chat_texts(served: Any) -> list[tuple[str, str]]:
    events = await served.server.web_store().events(CONVERSATION)
    return [(e.role, e.text) for e in events]


async def parent_session(served: Any) -> str:
    sessions = await served.runtime.sessions.list_sessions()
    [web] = [s for s in sessions if s.origin != "delegate"]
    return str(web.id)


async def user_texts(served: Any, session: str) -> list[str]:
    return [
        b.text
        for m in await served.runtime.sessions.messages(session)
        if m.message.role == "user"
        for b in m.message.blocks
        if isinstance(b, TextBlock)
    ]


async def started(
    factory: Any, monkeypatch: pytest.MonkeyPatch, server: FakeModelServer, tmp_path: Path
) -> Any:
    """The runtime, its workers and the web chat on the fake model server."""
    monkeypatch.setenv("FAKE_KEY", "k")
    return await factory(config(server, tmp_path / "ws"))


async def test_a_background_child_reports_in_a_turn_of_the_parent_session(
    serve: Any,  # noqa: F811
    server: FakeModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = await started(serve, monkeypatch, server, tmp_path)
    server.script(
        Reply(tool_calls=[delegate("find the bug", agent="helper", background=True)]),
        Reply("I started a helper."),
        Reply("The helper found it: line 3."),
        api="chat",
    )
    server.gates["anthropic"] = gate = asyncio.Event()
    server.script(Reply("The bug is on line 3."), api="anthropic")
    await chat(served, "find the bug in the background")
    await eventually(
        lambda: _has(served, ("assistant", "I started a helper.")), what="the parent's reply"
    )
    started_result = tool_results([r for r in server.requests if r.api == "chat"][1])
    assert "in the background: job sub_" in started_result[0]
    gate.set()
    await eventually(
        lambda: _has(served, ("assistant", "The helper found it: line 3.")),
        what="the parent's answer to the notice in the chat",
    )
    session = await parent_session(served)
    [child] = await served.runtime.delegation.children(session, active_only=False)
    notice = await served.runtime.turns.turn_outcome(f"turn_{child.job}")
    assert notice is not None and notice.status == "done"
    [text] = [t for t in await user_texts(served, session) if "sub-agent you delegated" in t]
    assert "done" in text and "The bug is on line 3." in text


async def _has(served: Any, entry: tuple[str, str]) -> bool:
    return entry in await chat_texts(served)


async def test_subagents_lists_a_running_child_and_stop_tells_the_parent(
    serve: Any,  # noqa: F811
    server: FakeModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = await started(serve, monkeypatch, server, tmp_path)
    empty = await chat(served, "/subagents")
    assert "No sub-agents" in empty["message"]
    server.script(
        Reply(tool_calls=[delegate("a long survey", agent="helper", background=True)]),
        Reply("Started."),
        Reply("Understood, the survey was stopped."),
        api="chat",
    )
    server.gates["anthropic"] = asyncio.Event()  # the child's model call never answers
    await chat(served, "survey in the background")
    await eventually(
        lambda: len([r for r in server.requests if r.api == "anthropic"]) == 1,
        what="the child's model call",
    )
    listed = (await chat(served, "/subagents"))["message"]
    session = await parent_session(served)
    [child] = await served.runtime.delegation.children(session)
    assert child.job in listed and "helper" in listed and "a long survey" in listed
    assert "running" in listed
    stopped = (await chat(served, f"/subagents stop {child.job[:8]}"))["message"]
    assert "Stopped sub-agent" in stopped and "stopped" in stopped
    assert await served.runtime.delegation.children(session) == []
    await eventually(
        lambda: _has(served, ("assistant", "Understood, the survey was stopped.")),
        what="the parent's answer to the stop notice",
    )
    [text] = [t for t in await user_texts(served, session) if "sub-agent you delegated" in t]
    assert "stopped" in text
    missing = await chat(served, "/subagents stop nope")
    assert "no running sub-agent 'nope'" in missing["message"]
