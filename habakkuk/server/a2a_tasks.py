"""A2A tasks on the turn service: a message is a turn job (spec 000 "Agent2Agent").

The task id is the turn's job id and the context id is the session id. A message with a
contextId continues that session only when A2A started it (web.db, server/a2a_store.py);
a contextId never seen starts a session under that id (the spec lets clients choose one),
unless a session of that id exists: a chat's session is never continued nor read;
the turn's id derives from the agent, the context and the messageId, so a resent message
attaches to its first task. Turns are queued, waited for and stopped through the same
turn service POST /v1 uses (runtime.turns); nobody can approve a call here, so the
turns are unattended.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

from habakkuk.channels.web import web_turn_id
from habakkuk.engine.agent.turn_access import TurnOutcome, outcome_of
from habakkuk.engine.errors import NotFound
from habakkuk.engine.sql import Database
from habakkuk.protocols.a2a import wire
from habakkuk.protocols.a2a.wire import Incoming, ListQuery, RpcError, TaskView

from . import a2a_store
from .a2a_store import A2ATask
from .served import Served

ORIGIN = "a2a"
CANCEL_WAIT_SECONDS = 10.0
CLIENT_CONTEXT = re.compile(r"[A-Za-z0-9_-]{1,100}")
LIST_SCAN = 1000  # ListTasks looks at this many of the newest tasks
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
        if incoming.task_id is not None:
            await self._refuse_follow_up(incoming.task_id)
        runtime = self.server.runtime
        context = incoming.context_id
        fresh = context is None  # a new conversation: a session A2A starts now
        if context is not None:
            owner = await a2a_store.context_agent(self._db, context)
            if owner is None:
                await self._check_new_context(context)
                fresh = True
            elif owner != agent:
                raise RpcError(
                    wire.INVALID_PARAMS,
                    f"contextId {context!r} belongs to agent {owner!r}, not {agent!r}",
                )
        turn = web_turn_id("a2a", f"{agent}\0{context or ''}\0{incoming.message_id}")
        record = await a2a_store.task(self._db, turn)
        if record is None:
            # The session's id is the context's: ours, or the one the client chose.
            if fresh:
                started = await runtime.sessions.new_session(
                    agent, origin=ORIGIN, session_id=context
                )
                context = started.id
            assert context is not None
            record = await a2a_store.remember_task(
                self._db,
                A2ATask(turn, context, agent, incoming.message_id, incoming.text, time.time()),
                new_context=fresh,
            )
        # Queued again when it exists (a no-op): the first request may have died between
        # recording the task and queueing its turn.
        await runtime.turns.submit(
            record.context, record.text, turn_id=record.task, attended=False, here=here
        )
        return record

    async def _refuse_follow_up(self, task_id: str) -> None:
        """A message naming a task: -32001 when A2A never started it, else -32004 (the
        spec's answer for a task in a terminal state; a running turn takes no message
        mid-turn, and Habakkuk's tasks never stop to wait for input)."""
        record = await self.record(task_id)
        view = await self.view(record)
        if view.final:
            raise RpcError(
                wire.UNSUPPORTED_OPERATION,
                f"task {task_id!r} is {view.state}: a finished task takes no more messages;"
                " send a new message with its contextId to go on",
            )
        raise RpcError(
            wire.UNSUPPORTED_OPERATION,
            f"task {task_id!r} is still {view.state}: Habakkuk's tasks take no message"
            " mid-turn; wait for its end and send a new message with its contextId",
        )

    async def _check_new_context(self, context: str) -> None:
        """A contextId this server has not seen starts a conversation under that id, when
        it is a plain id that names no session (a chat's session is never continued)."""
        if not CLIENT_CONTEXT.fullmatch(context):
            raise RpcError(
                wire.INVALID_PARAMS,
                "a new contextId is letters, digits, '_' and '-' (at most 100)",
            )
        with contextlib.suppress(NotFound):
            await self.server.runtime.sessions.session(context)
            raise RpcError(
                wire.INVALID_PARAMS,
                f"contextId {context!r} is not a conversation started over A2A",
            )

    async def record(self, task_id: str) -> A2ATask:
        """A task A2A started; -32001 for any other id (a chat's turns are not readable)."""
        found = await a2a_store.task(self._db, task_id)
        if found is None:
            raise RpcError(wire.TASK_NOT_FOUND, f"task {task_id!r} not found")
        return found

    async def view(self, record: A2ATask) -> TaskView:
        """The task as it is now (its turn job's state; the job's last change as the
        status time)."""
        job = await self.server.runtime.queue.get(record.task)
        if job is None:  # retention dropped the job (control.db keeps them 14 days)
            return self._view(record, "failed", "", "the task is no longer kept", time.time())
        outcome = outcome_of(job)
        state = _STATE.get(outcome.status, "working")
        reply = error = ""
        if state == "completed":
            reply = await self.reply_text(record, outcome)
        elif state == "failed":
            error = f"the turn failed: {outcome.error or 'unknown error'}"
        return self._view(record, state, reply, error, job.updated_at)

    @staticmethod
    def _view(record: A2ATask, state: str, reply: str, error: str, at: float) -> TaskView:
        return TaskView(
            id=record.task,
            context_id=record.context,
            state=state,
            user_text=record.text,
            user_message_id=record.message_id,
            reply=reply,
            error=error,
            at=at,
        )

    async def page(self, query: ListQuery) -> tuple[list[TaskView], int, int | None]:
        """A page of the tasks that match, newest first: the page, how many match, and the
        next page's offset (None on the last). The newest LIST_SCAN tasks are looked at."""
        records = await a2a_store.recent_tasks(self._db, query.context_id, LIST_SCAN)
        matching = []
        for record in records:
            view = await self.view(record)
            if query.state is not None and view.state != query.state:
                continue
            if query.after is not None and view.at < query.after:
                continue
            matching.append(view)
        end = query.offset + query.page_size
        following = end if end < len(matching) else None
        return matching[query.offset : end], len(matching), following

    async def reply_text(self, record: A2ATask, outcome: TurnOutcome) -> str:
        """The reply: each assistant text of the turn, a blank line between (as /v1)."""
        sessions = self.server.runtime.sessions
        written = await sessions.turn_messages(record.context, record.task)
        texts = [m.message.text for m in written if m.role == "assistant" and m.message.text]
        return "\n\n".join(t for t in texts if t.strip()) or outcome.reply

    async def wait(self, record: A2ATask, within: float | None = None) -> TaskView:
        """Wait for the turn to settle (here or in another process) and tell it; with
        `within`, at most that many seconds, then the task as it stands (still working:
        the spec lets processing go on after a send answers with a task)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self.server.runtime.turns.wait_turn(record.task)
        return await self.view(record)

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
                await turns.wait_turn(record.task, poll=0.1)
        return await self.view(record)
