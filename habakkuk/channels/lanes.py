"""Inbound events handled concurrently across chats, in order within each chat.

A channel gateway's work for one message is a handful of database writes; handled one
at a time, a bot in several busy chats waits on each write in turn. Handed over
concurrently, the writes of different chats share the store's batches (about 2.5 times
the messages per second on 2 cores). Within one chat the order is kept (a "yes" must
follow the prompt it answers, a turn the one before it): an event waits for the previous
event of its lane. Any adapter whose platform pushes events of many chats down one
stream uses it (Discord's gateway, Signal's event stream).

The position a resume starts from may only cover events that were handled: `through()`
is the highest sequence number below which every event has been handled, and a failure
(a database the gateway could not write to) is raised from it, so the position never
moves past an event that was not handled. A platform without a resume position calls
it too: it forgets the events that are done and raises a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
Handler = Callable[[T], Awaitable[None]]


class Lanes(Generic[T]):
    """Run `handler(item)` per item, at most `width` at once, one lane at a time each."""

    def __init__(
        self, handler: Handler[T], on_done: Callable[[], None], width: int = 16, name: str = "lanes"
    ):
        self._handler = handler
        self._name = name  # the platform, naming each handler's task
        self._on_done = on_done
        self._slots = asyncio.Semaphore(width)
        self._tails: dict[str, asyncio.Task[None]] = {}
        self._pending: dict[int, asyncio.Task[None]] = {}  # by sequence number, in order

    @property
    def idle(self) -> bool:
        """No event is being handled."""
        return not self._pending

    async def submit(self, lane: str, seq: int, item: T) -> None:
        """Start handling `item` after the lane's previous one (waits for a free slot)."""
        await self._slots.acquire()
        before = self._tails.get(lane)
        task = asyncio.create_task(self._run(before, item), name=f"{self._name}:event:{seq}")
        task.add_done_callback(self._done)
        self._tails[lane] = task
        self._pending[seq] = task

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled():
            task.exception()  # seen here; `through` raises it (after a teardown, nobody)
        self._on_done()

    async def _run(self, before: asyncio.Task[None] | None, item: T) -> None:
        try:
            if before is not None:
                await asyncio.wait({before})
                if before.cancelled() or before.exception() is not None:
                    return  # the lane broke: `through` raises its failure
            await self._handler(item)
        finally:
            self._slots.release()

    def through(self) -> int | None:
        """The highest sequence number up to which every event was handled (None: none
        since the last call); raises the failure of an event that could not be handled."""
        last = None
        for seq, task in list(self._pending.items()):
            if not task.done() or task.cancelled():
                break
            if (failure := task.exception()) is not None:
                raise failure
            del self._pending[seq]
            last = seq
        for lane, task in list(self._tails.items()):
            if task.done():
                del self._tails[lane]
        return last

    async def drain(self) -> int | None:
        """Wait until every event submitted was handled; `through()` then."""
        if self._pending:
            await asyncio.wait(set(self._pending.values()))
        return self.through()

    async def cancel(self) -> None:
        """Stop every event still being handled (the connection is being torn down): all
        are cancelled at once, so a stop of our own while waiting leaves none running."""
        tasks = list(self._pending.values())
        self._pending.clear()
        self._tails.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
