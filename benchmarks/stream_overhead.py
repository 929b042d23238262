"""Stream overhead: from the fake server writing a text chunk to a bus subscriber getting it.

The whole real path: the official SDK parsing the server-sent events, our
adapter, the router, the turn loop's publish on the events bus, and a
subscriber task waking up. The fake model server runs on its own event loop
in another thread and paces its chunks (PACE_MS apart), so each figure is the
latency of one chunk, not a backlog. Target: median <= 2 ms, p99 <= 10 ms.

Usage: python benchmarks/stream_overhead.py [--turns N] [--chunks N] [--pace-ms MS]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventPayload, Subscription, TurnText
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.fakes.model_server import FakeModelServer, Reply

CHUNK = "word "  # five characters a chunk
# Events each API sends before its first text delta.
HEAD_EVENTS = {"openai": 1, "anthropic": 3, "responses": 4}
URL_SUFFIX = {"openai": "/v1", "anthropic": "", "responses": "/v1"}

CONFIG = """
providers:
  remote:
    type: {kind}
    base_url: {url}
    key_env: BENCH_KEY
agents:
  main: {{model: remote/bench-model, mode: read-only, toolsets: []}}
"""


class PacedServer:
    """The fake server on its own loop; on_chunk sleeps so chunks go out PACE apart."""

    def __init__(self, pace: float):
        self.server = FakeModelServer()
        self.pace = pace
        self.sent: list[float] = []
        self.server.on_chunk = self._on_chunk
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def _on_chunk(self, _: float) -> None:
        # Runs on the server's own thread, right before the chunk is written.
        time.sleep(self.pace)
        self.sent.append(time.perf_counter())

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def measure(kind: str, turns: int, chunks: int, pace: float) -> list[float]:
    """Latencies in ms of every text chunk of `turns` turns through adapter `kind`."""
    import os

    os.environ["BENCH_KEY"] = "bench"
    paced = PacedServer(pace)
    paced.start()
    latencies: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Home(Path(tmp))
            url = paced.server.base_url + URL_SUFFIX[kind]
            text = CONFIG.format(kind=kind, url=url)
            runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
            try:
                runtime.start_workers()
                # Turn 0 warms up (the SDKs build their parsers on first use) and is not counted.
                for turn_number in range(turns + 1):
                    paced.sent.clear()
                    paced.server.script(Reply(text=CHUNK * chunks, chunk_size=len(CHUNK)))
                    session = await runtime.sessions.new_session()
                    received: list[float] = []
                    with runtime.bus.subscribe(text_of(session.id), maxsize=chunks * 2) as events:
                        follower = asyncio.create_task(follow(events, received, chunks))
                        turn = await runtime.turns.submit(session.id, "go")
                        outcome = await runtime.turns.wait_turn(turn)
                        await asyncio.wait_for(follower, 10)
                    if outcome.status != "done":
                        raise SystemExit(f"{kind}: turn {outcome.status}: {outcome.error}")
                    deltas = paced.sent[HEAD_EVENTS[kind] : HEAD_EVENTS[kind] + chunks]
                    if turn_number > 0:
                        latencies += [(r - s) * 1000 for s, r in zip(deltas, received, strict=True)]
            finally:
                await runtime.close()
    finally:
        paced.stop()
    return latencies


def text_of(session: str) -> Callable[[EventPayload], bool]:
    """The filter for one session's streamed text."""
    return lambda event: event.session == session and isinstance(event, TurnText)


async def follow(events: Subscription, received: list[float], count: int) -> None:
    """Note when each of `count` text events reaches this subscriber."""
    async for _event in events:
        received.append(time.perf_counter())
        if len(received) == count:
            return


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--pace-ms", type=float, default=2.0)
    args = parser.parse_args()
    print(f"{args.turns} turns x {args.chunks} chunks per adapter, chunks {args.pace_ms} ms apart")
    for kind in ("openai", "anthropic", "responses"):
        values = await measure(kind, args.turns, args.chunks, args.pace_ms / 1000)
        print(
            f"{kind:<10} n={len(values):<5} median {statistics.median(values):6.3f} ms"
            f"   p99 {percentile(values, 0.99):6.3f} ms   max {max(values):6.3f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
