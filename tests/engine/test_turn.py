"""The turn loop through the real runtime: queue, lease, transcript, tools, bus."""

from __future__ import annotations

import asyncio
from pathlib import Path

from habakkuk.engine.llm.types import ContextBlock, TextBlock
from habakkuk.engine.sessions import INTERRUPTED
from tests.conftest import OpenRuntime, mock_config

TOOL_THEN_TEXT = """
- text: "Checking."
  tool_calls:
    - {name: write_file, arguments: {path: a.txt, content: "A"}}
    - {name: list_dir, arguments: {}}
- text: "All done."
"""


async def test_turn_runs_tools_in_parallel_and_appends_results_in_one_message(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(mock_config(TOOL_THEN_TEXT, mode="workspace"))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    turn = await runtime.turns.submit(session.id, "make a file")
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "done" and outcome.reply == "All done."
    stored = await runtime.sessions.messages(session.id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    results = stored[2].message.tool_results
    assert len(results) == 2 and not any(r.is_error for r in results)
    calls = stored[1].message.tool_uses
    assert [r.tool_use_id for r in results] == [c.tool_use_id for c in calls]
    workspace = runtime.config.agents["main"].workspace_path
    assert (workspace / "a.txt").read_text() == "A"
    assert all(m.turn_id == turn for m in stored)


async def test_user_message_carries_the_time_after_the_typed_text(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(mock_config())
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hello")), 30
    )
    first = (await runtime.sessions.messages(session.id))[0].message
    assert isinstance(first.blocks[0], TextBlock) and first.blocks[0].text == "hello"
    stamp = first.blocks[1]
    assert isinstance(stamp, ContextBlock) and stamp.text.startswith("[current time: ")


async def test_deltas_stream_on_the_bus_before_the_turn_ends(runtime_factory: OpenRuntime) -> None:
    runtime = await runtime_factory(mock_config('- "one two three four"'))
    session = await runtime.sessions.new_session()
    kinds: list[str] = []
    texts: list[str] = []
    with runtime.bus.subscribe(lambda e: e.session == session.id) as events:
        runtime.start_workers()
        turn = await runtime.turns.submit(session.id, "count")
        while True:
            event = await asyncio.wait_for(events.get(), 30)
            kinds.append(event.kind)
            if event.kind == "turn.text":
                texts.append(event.data["text"])
            if event.kind == "turn.end":
                break
    assert "".join(texts) == "one two three four" and len(texts) == 4
    assert kinds.index("turn.text") < kinds.index("turn.message") < kinds.index("turn.end")
    assert (await runtime.turns.wait_turn(turn)).status == "done"


async def test_unattended_turn_denies_what_needs_approval(runtime_factory: OpenRuntime) -> None:
    script = """
    - tool_calls: [{name: exec, arguments: {command: "echo hi"}}]
    - text: "ok"
    """
    runtime = await runtime_factory(mock_config(script, mode="ask"))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "run it")), 30
    )
    result = (await runtime.sessions.messages(session.id))[2].message.tool_results[0]
    assert result.is_error and "nobody can approve" in result.text


async def test_read_only_mode_denies_writes(runtime_factory: OpenRuntime) -> None:
    script = """
    - tool_calls: [{name: write_file, arguments: {path: x, content: y}}]
    - text: "ok"
    """
    runtime = await runtime_factory(mock_config(script, mode="read-only"))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "write")), 30
    )
    result = (await runtime.sessions.messages(session.id))[2].message.tool_results[0]
    assert result.is_error and "read-only" in result.text


async def test_stopping_a_turn_leaves_a_result_for_every_call(runtime_factory: OpenRuntime) -> None:
    script = """
    - tool_calls:
        - {name: exec, arguments: {command: "sleep 30"}}
        - {name: list_dir, arguments: {}}
    - text: "never reached"
    """
    runtime = await runtime_factory(mock_config(script, mode="full"))
    session = await runtime.sessions.new_session()
    with runtime.bus.subscribe(lambda e: e.kind == "tool.start" and e.data["tool"] == "exec") as ev:
        runtime.start_workers()
        turn = await runtime.turns.submit(session.id, "sleep")
        await asyncio.wait_for(ev.get(), 30)
    await runtime.turns.stop_turn(turn)
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "cancelled"
    stored = await runtime.sessions.messages(session.id)
    calls = stored[1].message.tool_uses
    results = {r.tool_use_id: r for r in stored[2].message.tool_results}
    assert set(results) == {c.tool_use_id for c in calls}
    exec_result = results[calls[0].tool_use_id]
    assert exec_result.is_error and "stopped" in exec_result.text


async def test_a_stop_that_meets_the_approval_answer_still_stops_the_turn(
    runtime_factory: OpenRuntime,
) -> None:
    """Ctrl+C right after `a`: the answer and the stop land in one loop iteration.

    On Python 3.11 `asyncio.wait_for` returned the answer and dropped the stop, so the
    command ran and the turn went on (the tmux end-to-end test caught it on CI).
    """
    script = """
    - tool_calls: [{name: exec, arguments: {command: "touch ran.txt"}}]
    - text: "never reached"
    """
    runtime = await runtime_factory(mock_config(script, mode="ask"))
    runtime.approvals.attach()  # someone (a terminal) attends
    session = await runtime.sessions.new_session()
    with runtime.bus.subscribe(lambda e: e.kind == "approval.pending") as pending:
        runtime.start_workers()
        turn = await runtime.turns.submit(session.id, "touch it", attended=True)
        event = await asyncio.wait_for(pending.get(), 30)
    assert runtime.approvals.answer(event.data["id"], "allow_session")
    await runtime.turns.stop_turn(turn)  # stops the handler before its first await
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "cancelled"
    workspace = runtime.config.agents["main"].workspace_path
    assert not (workspace / "ran.txt").exists()
    result = (await runtime.sessions.messages(session.id))[2].message.tool_results[0]
    assert result.is_error and "stopped" in result.text


async def test_resumed_turn_records_interrupted_results_then_continues(
    runtime_factory: OpenRuntime,
) -> None:
    """A transcript left by a crash mid-tool-call is repaired and the turn completes once."""
    from habakkuk.engine.llm.types import Message, ToolUseBlock

    script = """
    - tool_calls: [{name: exec, arguments: {command: "sleep 30"}}]
    - text: "recovered"
    """
    runtime = await runtime_factory(mock_config(script, mode="full"))
    session = await runtime.sessions.new_session()
    await runtime.transcripts.append(session.id, Message.user_text("go"), turn_id="turn_x")
    await runtime.transcripts.append(
        session.id,
        Message("assistant", [ToolUseBlock("call_1", "exec", {"command": "sleep 30"})]),
        turn_id="turn_x",
    )
    await runtime.queue.enqueue(
        "turn_x", "turn", {"session": session.id, "text": "go"}, serial_key=session.id
    )
    runtime.start_workers()
    outcome = await asyncio.wait_for(runtime.turns.wait_turn("turn_x"), 30)
    assert outcome.status == "done" and outcome.reply == "recovered"
    stored = await runtime.sessions.messages(session.id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2].message.tool_results[0].text == INTERRUPTED


async def test_max_steps_stops_a_runaway_turn(runtime_factory: OpenRuntime) -> None:
    script = """
    - tool_calls: [{name: list_dir, arguments: {}}]
    - tool_calls: [{name: list_dir, arguments: {}}]
    - tool_calls: [{name: list_dir, arguments: {}}]
    """
    config = mock_config(script) + "    max_steps: 2\n"
    runtime = await runtime_factory(config)
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    outcome = await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "x")), 30
    )
    assert outcome.status == "failed" and "max_steps" in (outcome.error or "")


async def test_redelivered_turn_id_runs_once(runtime_factory: OpenRuntime) -> None:
    runtime = await runtime_factory(mock_config('- "hello"'))
    session = await runtime.sessions.new_session()
    first = await runtime.turns.submit(session.id, "hi", turn_id="msg-42")
    second = await runtime.turns.submit(session.id, "hi", turn_id="msg-42")
    assert first == second
    runtime.start_workers()
    await asyncio.wait_for(runtime.turns.wait_turn(first), 30)
    assert [m.role for m in await runtime.sessions.messages(session.id)] == ["user", "assistant"]


async def test_large_tool_output_goes_to_a_blob_with_a_preview(
    runtime_factory: OpenRuntime,
) -> None:
    script = """
    - tool_calls: [{name: exec, arguments: {command: "head -c 100000 /dev/zero | tr '\\\\0' x"}}]
    - text: "ok"
    """
    runtime = await runtime_factory(mock_config(script, mode="full"))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "big")), 30
    )
    result = (await runtime.sessions.messages(session.id))[2].message.tool_results[0]
    assert len(result.text) < 20_000
    assert "full output is saved at" in result.text
    path = result.text.rsplit("saved at ", 1)[1].split(";")[0]
    assert "x" * 99_000 in Path(path).read_text()


async def test_a_resumed_turn_runs_a_resumable_tools_unfinished_call_again_with_its_id(
    runtime_factory: OpenRuntime,
) -> None:
    """A tool that journals its work by call (a paid generation) is run again after a
    crash, with the same tool_use_id; any other unfinished call is recorded interrupted,
    and both results go in one message in the calls' order."""
    from typing import Any, ClassVar

    from habakkuk.engine.llm.types import Message, ToolUseBlock
    from habakkuk.engine.toolkit.permissions import Risk
    from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput

    runs: list[str] = []

    class Journalled(Tool):
        name = "journalled"
        description = "picks up its own work"
        input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
        risk = Risk.READ
        resumable = True

        async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            runs.append(ctx.call_id)
            return ToolOutput(f"picked up {ctx.call_id}")

    script = """
    - tool_calls: [{name: list_dir, arguments: {}}]
    - text: "recovered"
    """
    runtime = await runtime_factory(mock_config(script, mode="full"))
    runtime.tools.register(Journalled(), "core")
    session = await runtime.sessions.new_session()
    await runtime.transcripts.append(session.id, Message.user_text("go"), turn_id="turn_x")
    calls = [
        ToolUseBlock("call_1", "exec", {"command": "sleep 30"}),
        ToolUseBlock("call_2", "journalled", {}),
    ]
    await runtime.transcripts.append(
        session.id, Message("assistant", list(calls)), turn_id="turn_x"
    )
    await runtime.queue.enqueue(
        "turn_x", "turn", {"session": session.id, "text": "go"}, serial_key=session.id
    )
    runtime.start_workers()
    outcome = await asyncio.wait_for(runtime.turns.wait_turn("turn_x"), 30)
    assert outcome.status == "done"
    assert runs == ["call_2"]
    stored = await runtime.sessions.messages(session.id)
    results = stored[2].message.tool_results
    assert [(r.tool_use_id, r.text, r.is_error) for r in results] == [
        ("call_1", INTERRUPTED, True),
        ("call_2", "picked up call_2", False),
    ]
