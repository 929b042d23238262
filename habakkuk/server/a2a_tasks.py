"""A2A tasks on the turn service: a message is a turn job (spec 000 "Agent2Agent").

The task id is the turn's job id and the context id is the session id. A message with a
contextId continues that session only when A2A started it (web.db, server/a2a_store.py);
the turn's id derives from the agent, the context and the messageId, so a resent message
attaches to its first task. Turns are queued, waited for and stopped through the same
turn service POST /v1 uses (runtime.turns); nobody can approve a call here, so the
turns are unattended.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from habakkuk.channels.web import web_turn_id
from habakkuk.engine.agent.turn_access import TurnOutcome
from habakkuk.engine.sql import Database
from habakkuk.protocols.a2a import wire
from habakkuk.protocols.a2a.wire import Incoming, RpcError, TaskView

from . import a2a_store
from .a2a_store import A2ATask
from .served import Served

ORIGIN = "a2a"
CANCEL_WAIT_SECONDS = 10.0
# job status -> task state
_STATE = {
    "queued": "submitted",
    "running": "working",
    "done": "completed",
    "failed": "failed",
    "cancelled": "canceled",
}


class A2ATasks:
    """Start, read and stop the tasks of one server."""

    def __init__(self, server: Served):
        self.server = server

    @property
    def _db(self) -> Database:
        return self.server.web_store().db

    async def start(self, incoming: Incoming, agent: str, *, here: bool = False) -> A2ATask:
        """Queue (or find) the turn of a message; `here`: a stream follows it in this
        process, so this process runs it."""
        runtime = self.server.runtime
        context = incoming.context_id
        if context is not None:
            owner = await a2a_store.context_agent(self._db, context)
            if owner is None:
                raise RpcError(
                    wire.INVALID_PARAMS,
                    f"contextId {context!r} is not a conversation started over A2A",
                )
            if owner != agent:
                raise RpcError(
                    wire.INVALID_PARAMS,
                    f"contextId {context!r} belongs to agent {owner!r}, not {agent!r}",
                )
        turn = web_turn_id("a2a", f"{agent}\0{context or ''}\0{incoming.message_id}")
        record = await a2a_store.task(self._db, turn)
        if record is None:
            if context is None:
                session = await runtime.sessions.new_session(agent, origin=ORIGIN)
                context = session.id
                await a2a_store.remember_context(self._db, context, agent)
            record = await a2a_store.remember_task(
                self._db,
                A2ATask(turn, context, agent, incoming.message_id, incoming.text, time.time()),
            )
        # Queued again when it exists (a no-op): the first request may have died between
        # recording the task and queueing its turn.
        await runtime.turns.submit(
            record.context, record.text, turn_id=record.task, attended=False, here=here
        )
        return record

    async def record(self, task_id: str) -> A2ATask:
        """A task A2A started; -32001 for any other id (a chat's turns are not readable)."""
        found = await a2a_store.task(self._db, task_id)
        if found is None:
            raise RpcError(wire.TASK_NOT_FOUND, f"task {task_id!r} not found")
        return found

    async def view(self, record: A2ATask, outcome: TurnOutcome | None = None) -> TaskView:
        """The task as it is now."""
        if outcome is None:
            outcome = await self.server.runtime.turns.turn_outcome(record.task)
        state = "submitted" if outcome is None else _STATE.get(outcome.status, "working")
        reply = ""
        error = ""
        if outcome is not None and state == "completed":
            reply = await self.reply_text(record, outcome)
        elif outcome is not None and state == "failed":
            error = f"the turn failed: {outcome.error or 'unknown error'}"
        return TaskView(
            id=record.task,
            context_id=record.context,
            state=state,
            user_text=record.text,
            user_message_id=record.message_id,
            reply=reply,
            error=error,
            at=time.time(),
        )

    async def reply_text(self, record: A2ATask, outcome: TurnOutcome) -> str:
        """The reply: each assistant text of the turn, a blank line between (as /v1)."""
        sessions = self.server.runtime.sessions
        written = await sessions.turn_messages(record.context, record.task)
        texts = [m.message.text for m in written if m.role == "assistant" and m.message.text]
        return "\n\n".join(t for t in texts if t.strip()) or outcome.reply

    async def wait(self, record: A2ATask) -> TaskView:
        """Wait for the turn to settle (here or in another process) and tell it."""
        outcome = await self.server.runtime.turns.wait_turn(record.task)
        return await self.view(record, outcome)

    async def cancel(self, record: A2ATask) -> TaskView:
        """Stop the turn; -32002 when it has settled already."""
        before = await self.view(record)
        if before.final:
            raise RpcError(
                wire.TASK_NOT_CANCELABLE, f"task {record.task!r} is {before.state} already"
            )
        turns = self.server.runtime.turns
        await turns.stop_turn(record.task)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CANCEL_WAIT_SECONDS):
                return await self.view(record, await turns.wait_turn(record.task, poll=0.1))
        return await self.view(record)
