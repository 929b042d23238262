"""Traces: what a turn costs with telemetry off and on (spans to a collector on 127.0.0.1).

Each turn is the real path with the mock provider: one model call that asks for a tool
(list_dir), the tool, a second model call, the reply. Turns run one at a time; the modes
alternate over rounds and the medians are printed (wall ms and process CPU ms per turn,
spans exported). With telemetry off nothing subscribes to the bus and the router times
nothing, so "off" is the turn as it was.

Usage: python benchmarks/tracing_bench.py [TURNS] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventPayload, JobFinished
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime

CONFIG = """\
providers:
  mock:
    type: mock
    script:
      - steps:
          - text: "Listing."
            tool_calls: [{name: list_dir, arguments: {path: "."}}]
          - text: "Listed."
agents:
  main: {model: mock/bench, mode: full}
"""


class _Collector(BaseHTTPRequestHandler):
    """Accepts POST /v1/traces and counts the bytes (no decoding: the bench's side)."""

    received = 0

    def do_POST(self) -> None:  # http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).received += length
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


async def bench(turns: int, url: str | None) -> tuple[float, float]:
    """Wall and CPU ms per turn for `turns` turns, one at a time."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp))
        text = CONFIG + (f"telemetry:\n  otlp_endpoint: {url}\n" if url else "")
        runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
        runtime.start_workers()
        session = await runtime.sessions.new_session()
        finished = runtime.bus.subscribe(lambda e: isinstance(e, JobFinished), maxsize=16)
        await _turn(runtime, session.id, finished)  # warm up
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(turns):
            await _turn(runtime, session.id, finished)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        await runtime.close()
    return wall / turns * 1000, cpu / turns * 1000


async def _turn(runtime: Runtime, session: str, finished: object) -> None:
    await runtime.turns.submit(session, "hello")
    event: EventPayload = await finished.get()  # type: ignore[attr-defined]  # reason: a Subscription
    assert isinstance(event, JobFinished) and event.status == "done", event


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("turns", nargs="?", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    figures: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    for round_no in range(1, args.rounds + 1):
        for mode in ("off", "on"):
            figures[mode].append(asyncio.run(bench(args.turns, url if mode == "on" else None)))
        print(
            f"round {round_no}: " + ", ".join(f"{m} {f[-1][0]:.2f} ms" for m, f in figures.items())
        )
    server.shutdown()
    print(
        f"\n{args.turns} turns (2 model calls + 1 tool call each), one at a time, median of "
        f"{args.rounds} rounds:"
    )
    for mode, runs in figures.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"  telemetry {mode:<3}  {wall:6.2f} ms wall, {cpu:6.2f} ms CPU per turn")
    off = statistics.median(c for _, c in figures["off"])
    on = statistics.median(c for _, c in figures["on"])
    print(
        f"  spans cost {on - off:+.2f} ms CPU per turn (4 spans); "
        f"{_Collector.received:,} bytes of OTLP protobuf received"
    )


if __name__ == "__main__":
    main()
