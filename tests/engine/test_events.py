"""The events bus: fan-out without ever blocking the publisher."""

from __future__ import annotations

import asyncio

from habakkuk.engine.events import EventBus


async def test_every_subscriber_gets_every_event_in_order() -> None:
    bus = EventBus()
    with bus.subscribe() as a, bus.subscribe() as b:
        for n in range(3):
            bus.publish("turn.text", "s", text=str(n))
        for sub in (a, b):
            got = [(await asyncio.wait_for(sub.get(), 1)).data["text"] for _ in range(3)]
            assert got == ["0", "1", "2"]


async def test_a_slow_subscriber_drops_its_oldest_events_and_never_blocks() -> None:
    bus = EventBus()
    with bus.subscribe(maxsize=4) as slow, bus.subscribe(maxsize=100) as fast:
        for n in range(10):
            bus.publish("turn.text", "s", text=str(n))  # returns at once: no await
        assert slow.dropped == 6
        kept = [slow.get_nowait().data["text"] for _ in range(4)]  # type: ignore[union-attr]
        assert kept == ["6", "7", "8", "9"]
        assert fast.dropped == 0


async def test_filter_and_close() -> None:
    bus = EventBus()
    sub = bus.subscribe(lambda e: e.session == "mine")
    bus.publish("x", "other")
    bus.publish("x", "mine")
    assert (await asyncio.wait_for(sub.get(), 1)).session == "mine"
    assert sub.get_nowait() is None
    sub.close()
    assert bus.subscriber_count == 0
