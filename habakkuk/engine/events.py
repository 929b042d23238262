"""The in-process events bus: streaming deltas, tool activity and job changes for clients.

`publish` never blocks and never awaits: each subscriber has its own bounded
queue, and a subscriber that falls behind loses its oldest events (counted in
`dropped`) instead of slowing the turn that publishes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """One thing that happened. `kind` is dotted, e.g. "turn.text", "tool.end"."""

    kind: str
    session: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


EventFilter = Callable[[Event], bool]


class Subscription:
    """A subscriber's bounded queue; iterate it or `await get()`."""

    def __init__(self, bus: EventBus, maxsize: int, accept: EventFilter | None):
        self._bus = bus
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self._accept = accept
        self.dropped = 0
        self.closed = False

    def offer(self, event: Event) -> None:
        """Called by the bus: enqueue, dropping the oldest event when full."""
        if self._accept is not None and not self._accept(event):
            return
        while True:
            try:
                self._queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                try:
                    self._queue.get_nowait()
                    self.dropped += 1
                except asyncio.QueueEmpty:  # pragma: no cover - racing consumer
                    pass

    async def get(self) -> Event:
        return await self._queue.get()

    def get_nowait(self) -> Event | None:
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def close(self) -> None:
        self.closed = True
        self._bus.unsubscribe(self)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while not self.closed:
            yield await self._queue.get()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """Fan-out of events to subscribers in this process."""

    def __init__(self) -> None:
        self._subscribers: list[Subscription] = []

    def subscribe(self, accept: EventFilter | None = None, maxsize: int = 1024) -> Subscription:
        """A new subscription receiving events `accept` lets through (all by default)."""
        subscription = Subscription(self, maxsize, accept)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def publish(self, kind: str, session: str = "", **data: Any) -> Event:
        """Deliver an event to every subscriber without waiting on any of them."""
        event = Event(kind, session, data)
        for subscription in list(self._subscribers):
            subscription.offer(event)
        return event

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
