"""WhatsApp adapter throughput, against the event-boundary fake (tests/channels/fake_whatsapp.py).

Prints:
- parse: the adapter's own share of the inbound path (library event to InboundMessage);
- inbound: messages/s from the library's message events to queued turns (adapter,
  gateway, allowlist, seen keys, the durable enqueue), target >= 200/s;
- outbound: deliveries/s from queued delivery jobs (`habakkuk send`'s path) to
  messages the adapter built and handed to the client, target >= 200/s;
- reconnect: seconds from a dropped connection to the adapter connected again (the
  supervisor's first backoff included).

    PYTHONPATH=. python benchmarks/channel_whatsapp_bench.py [-n 400] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import tempfile
import time
from pathlib import Path

from habakkuk.channels import whatsapp_client
from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.fake_whatsapp import PERSON, FakeWhatsApp

CONFIG = """
providers:
  mock:
    type: mock
agents:
  main:
    model: mock/echo
    mode: full
channels:
  wa:
    type: whatsapp
    allow_from: "*"
"""


def count(home: Home, sql: str) -> int:
    with contextlib.closing(sqlite3.connect(home.db_path("control"))) as conn:
        return int(conn.execute(sql).fetchone()[0])


async def until(condition: object, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]  # a zero-argument predicate
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark's condition did not hold in time")
        await asyncio.sleep(0.05)  # polling control.db more often slows what it measures


async def bench(n: int, where: str | None = None) -> None:
    network = FakeWhatsApp()
    whatsapp_client.open_client = network.open  # the fake stands where neonize would
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        home = Home(Path(tmp) / "home")
        home.prepare()
        home.config_path.write_text(CONFIG, encoding="utf-8")
        runtime = await Runtime.open(home, parse_config(CONFIG, home.config_path, home))
        try:
            runtime.channel_service()
            assert runtime.channels is not None
            runtime.channels.start()
            await runtime.channels.started()
            await until(lambda: any(c.connected for c in network.clients))

            start = time.perf_counter()
            for i in range(n):
                await network.message(f"message {i}")
            await until(lambda: count(home, "SELECT COUNT(*) FROM jobs WHERE kind='turn'") >= n)
            inbound = n / (time.perf_counter() - start)
            runtime.start_workers()
            await until(lambda: len(network.sent) >= n, limit=600)

            before = len(network.sent)
            start = time.perf_counter()
            for i in range(n):
                await runtime.outbox.send_text(
                    f"bench:{i}", f"wa:{PERSON}@s.whatsapp.net", f"note {i}"
                )
            await until(lambda: len(network.sent) - before >= n, limit=600)
            outbound = n / (time.perf_counter() - start)

            first = network.client
            start = time.perf_counter()
            await network.drop()
            await until(lambda: any(c.connected and c is not first for c in network.clients))
            reconnect = time.perf_counter() - start
        finally:
            await runtime.close()
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

    from habakkuk.channels.whatsapp_parse import Me, to_inbound

    events = [network.event(WAMessage(conversation=f"m {i}")) for i in range(n)]
    start = time.perf_counter()
    for event in events:
        to_inbound("wa", Me("4915100000001"), event)
    parsed = n / (time.perf_counter() - start)
    print(f"parse:     {parsed:8.0f} events/s to InboundMessage (the adapter's own share)")
    print(f"inbound:   {inbound:8.0f} messages/s to queued turns ({n} messages)")
    print(f"outbound:  {outbound:8.0f} deliveries/s ({n} queued sends)")
    print(f"reconnect: {reconnect:8.2f} s after the connection dropped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=400, help="messages each way")
    parser.add_argument("--dir", help="where the home goes (e.g. /dev/shm: no fsync cost)")
    args = parser.parse_args()
    asyncio.run(bench(args.n, args.dir))


if __name__ == "__main__":
    main()
