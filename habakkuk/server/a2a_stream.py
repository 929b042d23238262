"""A2A streams: message/stream (SendStreamingMessage) and tasks/resubscribe (SubscribeToTask).

The stream sends the task, a working status, working statuses whose message holds the
model's text so far (batched, at most every BATCH_SECONDS, marked metadata.partial), then
the reply as an artifact update with lastChunk and the final status, and closes; a
keepalive comment goes out every KEEPALIVE_SECONDS. A client that disconnects leaves the
turn running (it is a job of the pool, not of this handler); a resubscribe follows it
again from that moment. Each event is a JSON-RPC answer to the request, as SSE data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from aiohttp import web

from habakkuk.engine.events import EventPayload, ToolCallStreamed, ToolStarted, TurnText
from habakkuk.protocols.a2a import wire
from habakkuk.protocols.a2a.wire import TaskView, Version

from .a2a_store import A2ATask
from .a2a_tasks import A2ATasks
from .served import server_of

BATCH_SECONDS = 0.3
KEEPALIVE_SECONDS = 15.0


class _Sse:
    """The open event stream of one request."""

    def __init__(self, response: web.StreamResponse, request_id: Any, version: Version):
        self.response = response
        self.request_id = request_id
        self.version = version

    async def send(self, result: dict[str, Any]) -> None:
        text = json.dumps(wire.answer(self.request_id, result), ensure_ascii=False)
        await self.response.write(f"data: {text}\n\n".encode())

    async def keepalive(self) -> None:
        await self.response.write(b": keepalive\n\n")


async def follow(
    request: web.Request, tasks: A2ATasks, record: A2ATask, version: Version, request_id: Any
) -> web.StreamResponse:
    """Stream the task until it settles (or the client goes)."""
    server = server_of(request)

    def ours(event: EventPayload) -> bool:
        if event.session != record.context:
            return False
        if isinstance(event, (TurnText, ToolCallStreamed)):
            return event.turn == record.task
        return isinstance(event, ToolStarted)  # a tool call names no turn

    with server.runtime.bus.subscribe(ours, maxsize=8192) as events:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        server.track_stream()
        sse = _Sse(response, request_id, version)
        with contextlib.suppress(ConnectionError):
            view = await tasks.view(record)
            await sse.send(wire.task_event(version, view))
            if not view.final:
                working = _with_state(view, "working")
                await sse.send(wire.status_event(version, working))
                waiter = asyncio.create_task(tasks.wait(record))
                try:
                    view = await _relay(sse, events, waiter, working)
                finally:
                    if not waiter.done():
                        waiter.cancel()
            await _finish(sse, view)
    return response


def _with_state(view: TaskView, state: str) -> TaskView:
    return TaskView(
        view.id,
        view.context_id,
        state,
        view.user_text,
        view.user_message_id,
        view.reply,
        view.error,
        time.time(),
    )


async def _relay(
    sse: _Sse, events: Any, waiter: asyncio.Task[TaskView], working: TaskView
) -> TaskView:
    """Send the text so far as it comes (batched) until the turn settles."""
    text = ""
    sent = ""
    gap = False  # a tool ran since the last text: the next text starts a new paragraph
    last_flush = 0.0
    last_write = time.monotonic()
    while True:
        now = time.monotonic()
        pending = text != sent
        flush_in = max(0.0, last_flush + BATCH_SECONDS - now) if pending else None
        keepalive_in = max(0.0, last_write + KEEPALIVE_SECONDS - now)
        timeout = keepalive_in if flush_in is None else min(flush_in, keepalive_in)
        getter = asyncio.create_task(events.get())
        done, _ = await asyncio.wait(
            {getter, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if getter in done:
            event = getter.result()
            if isinstance(event, TurnText):
                text += ("\n\n" if gap and text else "") + event.text
                gap = False
            elif isinstance(event, (ToolCallStreamed, ToolStarted)):
                gap = True
        else:
            getter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await getter
        now = time.monotonic()
        if waiter in done:
            return waiter.result()
        if text != sent and now - last_flush >= BATCH_SECONDS:
            partial = _with_state(working, "working")
            await sse.send(wire.status_event(sse.version, partial, text, partial=True))
            sent, last_flush, last_write = text, now, now
        elif now - last_write >= KEEPALIVE_SECONDS:
            await sse.keepalive()
            last_write = now


async def _finish(sse: _Sse, view: TaskView) -> None:
    """The reply as the artifact (completed), then the final status."""
    if view.state == "completed":
        await sse.send(wire.artifact_event(sse.version, view, view.reply))
        await sse.send(wire.status_event(sse.version, view))
    elif view.state == "failed":
        await sse.send(wire.status_event(sse.version, view, view.error))
    else:
        await sse.send(wire.status_event(sse.version, view, "the turn was stopped"))
