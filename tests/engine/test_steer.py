"""/steer (spec 000 "Chat commands"): guidance for a running turn reaches its very next
model call, after the next batch of tool results; guidance that arrives after the turn's
last tool call becomes one follow-up turn; with nothing running, nothing is queued (the
surface sends it as a message). Driven through the turns service on the scripted fake
model server (Chat Completions)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.agent.guidance import follow_up_id, is_guidance
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.helpers import eventually
from tests.hook_log import HookLog
from tests.work.delegation_env import config

GUIDANCE = "use metric units"


@pytest.fixture(params=["sqlite", "postgres"])
async def idle(
    request: pytest.FixtureRequest,
    model_server: FakeModelServer,
    runtime_factory: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """A runtime without workers on each engine (state and transcripts share a
    transaction on both: SQLite's attached files, PostgreSQL's schemas)."""
    monkeypatch.setenv("FAKE_KEY", "k")
    hooks = HookLog(tmp_path / "hooks")
    extra = hooks.config(hooks.entry("turn_start", "start"), hooks.entry("turn_end", "end"))
    if request.param == "postgres":
        extra += f"storage: {{url: '{request.getfixturevalue('pg_url')}'}}\n"
    opened = await runtime_factory(config(model_server, tmp_path / "ws", extra=extra))
    opened.hook_log = hooks
    return opened


@pytest.fixture
async def runtime(idle: Any) -> Any:
    """The runtime with its workers running."""
    idle.start_workers(channels=False)
    return idle


def chat(server: FakeModelServer) -> list[Any]:
    return [r for r in server.requests if r.api == "chat"]


def user_texts(request: Any) -> list[str]:
    """The text of every user message of a Chat Completions request, in order."""
    return [str(m.get("content")) for m in request.json["messages"] if m.get("role") == "user"]


async def hooks_fired(hooks: HookLog, turn: str) -> None:
    """Wait until the turn's turn_start and turn_end hooks ran (each its own process, so
    in either order)."""

    def fired(label: str) -> bool:
        return turn in {e["turn"] for e in hooks.events(label)}

    await eventually(lambda: fired("start"), what=f"the turn_start hook of {turn}")
    await eventually(lambda: fired("end"), what=f"the turn_end hook of {turn}")


async def steer_while_the_first_call_waits(runtime: Any, server: FakeModelServer) -> str:
    """Start a turn, hold its first model call, steer it, let the call answer; the turn."""
    server.gates["chat"] = gate = asyncio.Event()
    session = await runtime.sessions.new_session("main")
    turn = await runtime.turns.submit(session.id, "how far is the moon?")
    await eventually(lambda: len(chat(server)) == 1, what="the first model call")
    assert await runtime.turns.steer(session.id, GUIDANCE) is True
    gate.set()
    return str(turn)


async def test_steer_reaches_the_model_call_after_the_next_tool_batch(
    runtime: Any, model_server: FakeModelServer
) -> None:
    model_server.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
        Reply("384,400 km."),
        api="chat",
    )
    turn = await steer_while_the_first_call_waits(runtime, model_server)
    outcome = await runtime.turns.wait_turn(turn, poll=0.05)
    assert outcome.status == "done" and outcome.reply == "384,400 km."
    first, second = chat(model_server)
    assert not any(GUIDANCE in text for text in user_texts(first))
    # After the tool's result, in the same message: the next call reads it.
    messages = second.json["messages"]
    tool_at = max(i for i, m in enumerate(messages) if m.get("role") == "tool")
    assert GUIDANCE in str(messages[tool_at + 1].get("content"))
    stored = await runtime.sessions.messages(outcome.session)
    carried = [m for m in stored if any(is_guidance(b) for b in m.message.blocks)]
    assert len(carried) == 1 and carried[0].message.tool_results  # marked, with the results
    assert await runtime.queue.get(follow_up_id(turn)) is None  # taken: nothing follows up


async def test_steer_after_the_last_tool_call_becomes_one_follow_up_turn(
    runtime: Any, model_server: FakeModelServer
) -> None:
    model_server.script(Reply("About 384,000 miles."), Reply("384,400 km."), api="chat")
    turn = await steer_while_the_first_call_waits(runtime, model_server)
    outcome = await runtime.turns.wait_turn(turn, poll=0.05)
    assert outcome.reply == "About 384,000 miles."
    follow_up = await runtime.turns.wait_turn(follow_up_id(turn), poll=0.05)
    assert follow_up.status == "done" and follow_up.reply == "384,400 km."
    assert follow_up.session == outcome.session  # the same conversation, after the turn
    assert GUIDANCE in user_texts(chat(model_server)[1])[-1]
    # Its message names the guidance row it holds (so a torn commit never doubles it).
    stored = await runtime.sessions.turn_messages(outcome.session, follow_up_id(turn))
    assert any(is_guidance(b) for b in stored[0].message.blocks)
    # The follow-up fires the turn hooks like any other turn.
    await hooks_fired(runtime.hook_log, follow_up_id(turn))


async def test_steer_with_nothing_running_queues_nothing(
    runtime: Any, model_server: FakeModelServer
) -> None:
    model_server.script(Reply("hello"), api="chat")
    session = await runtime.sessions.new_session("main")
    done = await runtime.turns.submit(session.id, "hi")
    await runtime.turns.wait_turn(done, poll=0.05)
    assert await runtime.turns.steer(session.id, GUIDANCE) is False
    assert await runtime.queue.get(follow_up_id(done)) is None
    model_server.script(Reply("again"), api="chat")
    later = await runtime.turns.submit(session.id, "next")
    await runtime.turns.wait_turn(later, poll=0.05)
    assert not any(GUIDANCE in text for text in user_texts(chat(model_server)[-1]))


async def test_btw_runs_beside_a_running_turn_and_leaves_its_transcript_alone(
    runtime: Any, model_server: FakeModelServer, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    wait_for_go = f"while [ ! -e {go} ]; do sleep 0.05; done; echo went"
    model_server.script(Reply(tool_calls=[ToolCall("exec", {"command": wait_for_go})]), api="chat")
    session = await runtime.sessions.new_session("main")
    turn = await runtime.turns.submit(session.id, "wait for the go file")

    async def calling() -> bool:
        stored = await runtime.sessions.messages(session.id)
        return any(m.message.tool_uses for m in stored)

    await eventually(calling, what="the main turn's tool call")
    before = await runtime.sessions.messages(session.id)
    model_server.script(Reply("You are waiting for a file."), api="chat")
    aside = await runtime.turns.ask_aside(session.id, "what are we doing?")
    answered = await runtime.turns.wait_turn(aside, poll=0.05)
    assert answered.status == "done" and answered.reply == "You are waiting for a file."
    assert (await runtime.queue.get(turn)).status == "running"  # beside it, not after it
    # The aside's one message: the conversation as text, then the question.
    [asked] = user_texts(chat(model_server)[-1])[-1:]
    assert asked.index("wait for the go file") < asked.index("what are we doing?")
    assert await runtime.sessions.messages(session.id) == before
    thrown = await runtime.sessions.session(answered.session)
    assert thrown.origin == "btw" and thrown.agent == "main" and thrown.id != session.id
    listed = {s.id for s in await runtime.sessions.list_sessions()}
    assert session.id in listed and thrown.id not in listed
    # Its turn fires the turn hooks like any other turn.
    await hooks_fired(runtime.hook_log, aside)
    model_server.script(Reply("It came."), api="chat")
    go.touch()
    finished = await runtime.turns.wait_turn(turn, poll=0.05)
    assert finished.status == "done" and finished.reply == "It came."


async def test_steer_counts_a_queued_turn_but_not_a_compaction(idle: Any) -> None:
    session = await idle.sessions.new_session("main")
    await idle.turns.compact_session(session.id)
    assert await idle.turns.steer(session.id, GUIDANCE) is False  # a message, after it
    turn = await idle.turns.submit(session.id, "how far is the moon?")
    assert await idle.turns.steer(session.id, GUIDANCE) is True  # its opening takes it
    assert (await idle.queue.get(turn)).status == "queued"
