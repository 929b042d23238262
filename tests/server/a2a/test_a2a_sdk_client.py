"""The a2a-sdk client (1.0 and 0.3 transports) against our /a2a over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError

from tests.helpers import eventually

from .helpers import a2a_config, sdk_client, user_message

VERSIONS = ["1.0", "0.3"]


async def _send(client: Any, request: Any) -> Any:
    events = [event async for event in client.send_message(request)]
    return events


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_message_runs_a_turn_and_the_task_is_the_turn_job(serve: Any, version: str) -> None:
    served = await serve(a2a_config())
    async with sdk_client(served.url, served.token, version) as (client, card):
        assert card.name == "Habakkuk"
        assert [s.id for s in card.skills] == ["main"]
        events = await _send(client, user_message("hello there", "m-1"))
        task = events[-1].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "Echo: hello there"
        assert task.history[-1].parts[0].text == "Echo: hello there"
        job = await served.runtime.queue.get(task.id)
        assert job is not None and job.status == "done"
        session = await served.runtime.sessions.session(task.context_id)
        assert session.agent == "main"
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert got.artifacts[0].parts[0].text == "Echo: hello there"


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_context_continues_its_session_and_a_resend_attaches_to_the_first_task(
    serve: Any, version: str
) -> None:
    served = await serve(a2a_config())
    async with sdk_client(served.url, served.token, version) as (client, _):
        first = (await _send(client, user_message("one", "m-1")))[-1].task
        again = (await _send(client, user_message("one", "m-1")))[-1].task
        assert again.id == first.id and again.context_id == first.context_id
        second = (await _send(client, user_message("two", "m-2", first.context_id)))[-1].task
        assert second.context_id == first.context_id and second.id != first.id
        texts = [m.message.text for m in await served.runtime.sessions.messages(first.context_id)]
        assert texts == ["one", "Echo: one", "two", "Echo: two"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_chat_session_cannot_be_continued_nor_its_turns_read(
    serve: Any, version: str
) -> None:
    served = await serve(a2a_config())
    runtime = served.runtime
    session = await runtime.sessions.new_session("main", origin="cli")
    turn = await runtime.turns.submit(session.id, "private")
    await runtime.turns.wait_turn(turn)
    async with sdk_client(served.url, served.token, version) as (client, _):
        with pytest.raises(InvalidParamsError, match="not a conversation started over A2A"):
            await _send(client, user_message("let me in", "m-1", session.id))
        with pytest.raises(TaskNotFoundError, match="not found"):
            await client.get_task(GetTaskRequest(id=turn))


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_stream_sends_the_task_partial_text_the_artifact_and_the_final_status(
    serve: Any, version: str
) -> None:
    served = await serve(a2a_config())
    async with sdk_client(served.url, served.token, version, streaming=True) as (client, _):
        events = await _send(client, user_message("use the tool", "m-1"))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    partial = [
        e.status_update.status.message.parts[0].text
        for e in events
        if e.WhichOneof("payload") == "status_update"
        and "partial" in e.status_update.status.message.metadata
    ]
    reply = "Before the tool.\n\nAfter the tool."
    # The text so far, batched: the tool's second keeps "Before the tool." apart.
    assert "Before the tool." in partial
    assert all(reply.startswith(text) for text in partial)
    artifact = next(
        e.artifact_update for e in events if e.WhichOneof("payload") == "artifact_update"
    )
    assert artifact.last_chunk
    assert artifact.artifact.parts[0].text == reply
    last = events[-1].status_update
    assert last.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("version", VERSIONS)
async def test_cancel_stops_a_running_task_and_a_finished_one_is_not_cancelable(
    serve: Any, version: str
) -> None:
    served = await serve(a2a_config())
    async with sdk_client(served.url, served.token, version) as (client, _):
        request = user_message("slow please", "m-1")
        request.configuration.return_immediately = True
        task = (await _send(client, request))[-1].task
        assert task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )

        async def running() -> bool:
            job = await served.runtime.queue.get(task.id)
            return job is not None and job.status == "running"

        await eventually(running, what="the turn to run")
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError, match="canceled already"):
            await client.cancel_task(CancelTaskRequest(id=task.id))
