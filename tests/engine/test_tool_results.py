"""No tool call leaves the transcript without a result: refused, failed, timed out, stopped."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.agent.turn import STOPPED
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput
from tests.conftest import mock_config


class Boom(Tool):
    """A tool with a bug: it raises something no tool should."""

    name = "boom"
    description = "raises"
    input_schema = {"type": "object", "properties": {}}
    risk = Risk.READ

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise KeyError("surprise")


EVERYTHING_GOES_WRONG = """
- tool_calls:
    - {name: exec, arguments: {command: "rm -rf /"}}
    - {name: read_file, arguments: {path: no-such-file.txt}}
    - {name: exec, arguments: {command: "sleep 30", timeout_seconds: 0.3}}
    - {name: no_such_tool, arguments: {}}
    - {name: write_file, arguments: {path: 3}}
    - {name: boom, arguments: {}}
    - {name: exec, arguments: {command: "echo fine"}}
- text: "survived"
"""


async def test_every_call_gets_its_own_result_whatever_happens(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config(EVERYTHING_GOES_WRONG, mode="full"))
    runtime.tools.register(Boom(), "core")
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    outcome = await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "go")), 30
    )
    assert outcome.status == "done" and outcome.reply == "survived"
    stored = await runtime.sessions.messages(session.id)
    calls = stored[1].message.tool_uses
    results = stored[2].message.tool_results
    assert [r.tool_use_id for r in results] == [c.tool_use_id for c in calls]
    texts = [r.text for r in results]
    assert [r.is_error for r in results] == [True] * 6 + [False]
    assert texts[0].startswith("refused (hardline)")
    assert "no such file" in texts[1]
    assert "timed out" in texts[2]
    assert "unknown tool" in texts[3]
    assert texts[4].startswith("bad arguments for write_file")
    assert "failed unexpectedly" in texts[5] and "surprise" in texts[5]
    assert "fine" in texts[6]


SLOW = """
- tool_calls:
    - {name: exec, arguments: {command: "sleep 60"}}
    - {name: list_dir, arguments: {}}
- text: "never"
"""


async def test_a_stopped_turn_records_a_result_for_every_started_call(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config(SLOW, mode="full"))
    session = await runtime.sessions.new_session()
    with runtime.bus.subscribe(
        lambda e: e.kind == "tool.start" and e.data.get("tool") == "exec"
    ) as started:
        runtime.start_workers()
        turn = await runtime.turns.submit(session.id, "go")
        await asyncio.wait_for(started.get(), 30)
        await runtime.turns.stop_turn(turn)
        outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "cancelled"
    stored = await runtime.sessions.messages(session.id)
    calls = stored[1].message.tool_uses
    results = stored[-1].message.tool_results
    assert {r.tool_use_id for r in results} == {c.tool_use_id for c in calls}
    by_id = {r.tool_use_id: r for r in results}
    assert by_id[calls[0].tool_use_id].text == STOPPED


NOTIFY = """
- match: "Background process"
  steps:
    - text: "noted the exit"
- steps:
    - tool_calls:
        - {name: exec, arguments: {command: "exit 7", background: true, notify: true}}
    - text: "started it"
"""


async def test_a_notify_process_exit_starts_a_turn_in_its_session(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config(NOTIFY, mode="full"))
    session = await runtime.sessions.new_session()
    with runtime.bus.subscribe(
        lambda e: e.kind == "turn.end" and e.data.get("reply") == "noted the exit"
    ) as noticed:
        runtime.start_workers()
        await asyncio.wait_for(
            runtime.turns.wait_turn(await runtime.turns.submit(session.id, "go")), 30
        )
        event = await asyncio.wait_for(noticed.get(), 30)
    stored = await runtime.sessions.messages(session.id)
    started = stored[2].message.tool_results[0].text
    process = re.search(r"p_[0-9a-f]+", started)
    assert process is not None
    assert event.data["turn"] == f"turn_{process.group(0)}"
    notice = next(m.message.text for m in stored if m.turn_id == event.data["turn"])
    assert notice.startswith(f"Background process {process.group(0)} (exit 7) exited with code 7")


async def test_background_processes_die_with_the_runtime(runtime_factory: Any) -> None:
    script = """
    - tool_calls: [{name: exec, arguments: {command: "sleep 300", background: true}}]
    - text: "ok"
    """
    runtime = await runtime_factory(mock_config(script, mode="full"))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "go")), 30
    )
    [info] = runtime.processes.list("main")
    assert info.running
    await runtime.close()
    assert runtime.processes.list("main") == []
    assert not list(runtime.home.procs_dir.iterdir())


async def test_the_exit_notice_turn_carries_the_starting_turns_reply_address(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config(NOTIFY, mode="full"))
    session = await runtime.sessions.new_session()
    address = ReplyTo("test:chat:1", "m1", "u1")
    with runtime.bus.subscribe(
        lambda e: e.kind == "turn.end" and e.data.get("reply") == "noted the exit"
    ) as noticed:
        runtime.start_workers()
        turn = await runtime.turns.submit(session.id, "go", reply_to=address)
        await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
        event = await asyncio.wait_for(noticed.get(), 30)
    job = await runtime.queue.get(event.data["turn"])
    assert job is not None
    assert job.payload["reply_to"] == {"to": "test:chat:1", "message": "m1", "sender": "u1"}
