"""The Discord adapter against its fake: messages in per second, deliveries out per second,
and the time to resume after the fake drops the socket.

- inbound: N MESSAGE_CREATE dispatches (in one chat, then spread over 8: chats are
  handled concurrently, each in order) over the gateway websocket, each through the
  adapter and the channel gateway (allowlist, seen keys, session binding) to a turn job
  queued in control.db; timed from the first dispatch to the Nth queued turn. No turn
  runs (the turn pool is not started), so what is timed is the inbound path alone.
- baseline: the same N messages handed to the channel gateway directly (no websocket,
  no adapter): the difference is what the adapter costs.
- outbound: M text deliveries queued at once over 8 chats (deliveries of one chat go in
  order, one at a time), through the delivery pool and the REST POST, each chunk recorded;
  timed from the first enqueue to the Mth message the fake accepted.
- reconnect: the fake cuts the socket (no close frame) R times; the time from the cut to
  RESUMED on the new connection (the adapter notices the end of the socket at once and
  resumes with the saved session and sequence number).

Usage: python benchmarks/channel_discord_bench.py [N] [--rounds K] [--out M] [--reconnects R]
Targets: inbound and outbound >= 200/s each, so the adapter is never the bottleneck.
"""

# The measurements watch the fake and control.db: there is no event to await for them.

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fresh_home, mock_config
from tests.channels.fake_discord import BOT_TOKEN, USER_ID, FakeDiscord


def turns_queued(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'turn'").fetchone()[0])


async def until(predicate: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark waited too long")
        await asyncio.sleep(0.1)  # seldom: the fake and the runtime share this loop


async def main(count: int, out: int, reconnects: int, rounds: int) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime

    os.environ["DISCORD_TOKEN"] = BOT_TOKEN
    os.environ["HABAKKUK_NO_KEYRING"] = "1"
    async with FakeDiscord() as dc:
        channel = (
            "channels:\n  dc:\n    type: discord\n    token_env: DISCORD_TOKEN\n"
            f"    base_url: {dc.base_url}\n    allow_from: ['{USER_ID}']\n"
        )
        with tempfile.TemporaryDirectory() as tmp:
            config_text = mock_config(extra=channel)
            home = fresh_home(Path(tmp) / "home", config_text)
            runtime = await Runtime.open(home, parse_config(config_text, home.config_path, home))
            try:
                service = runtime.channel_service()
                service.start()
                await service.started()
                await dc.wait_for(lambda: dc.connected)
                db = home.db_path("control")

                # warm up: the first message of a chat makes its session
                for chats in range(9):
                    dc.message("warm up", channel=str(210000000000000000 + chats))
                await until(lambda: turns_queued(db) >= 9)
                # Alternating rounds (the machine's load varies): the adapter in one chat,
                # the gateway alone, the adapter over 8 chats; medians printed.
                from habakkuk.channels.adapter import InboundMessage

                rates: dict[str, list[float]] = {"one": [], "alone": [], "eight": []}
                for round_ in range(rounds):
                    for label, chats in (("one", 1), ("eight", 8)):
                        before = turns_queued(db)
                        started = time.perf_counter()
                        for i in range(count):
                            chat = str(210000000000000000 + i % chats)
                            dc.message(f"message {round_} {i}", channel=chat)
                        await until(lambda b=before: turns_queued(db) >= b + count)  # type: ignore[misc]
                        rates[label].append(count / (time.perf_counter() - started))
                    # the same work without the adapter: InboundMessages handed to the
                    # channel gateway directly, one at a time as one chat's are
                    started = time.perf_counter()
                    for i in range(count):
                        await service.gateway.handle(
                            InboundMessage(
                                "dc", "210000000000000000", f"b{round_}.{i}", USER_ID, "m"
                            )
                        )
                    rates["alone"].append(count / (time.perf_counter() - started))
                one, alone = statistics.median(rates["one"]), statistics.median(rates["alone"])
                eight = statistics.median(rates["eight"])
                print(
                    f"inbound:   one chat {one:.0f}/s, 8 chats {eight:.0f}/s to queued turns "
                    f"(target >= 200/s; medians of {rounds} rounds of {count})"
                )
                print(
                    f"baseline:  the channel gateway alone {alone:.0f}/s: the adapter adds "
                    f"{(1 / one - 1 / alone) * 1000:.2f} ms per message in one chat"
                )

                targets = [str(500000000000000000 + i) for i in range(8)]
                made = len(dc.messages)
                started = time.perf_counter()
                for i in range(out):
                    await service.send_text(f"bench:{i}", f"dc:{targets[i % 8]}", f"delivery {i}")
                await dc.wait_for(lambda: len(dc.messages) >= made + out, timeout=300)
                outbound = time.perf_counter() - started
                print(
                    f"outbound:  {out} deliveries in {outbound:.2f}s: "
                    f"{out / outbound:.0f}/s (target >= 200/s)"
                )

                times: list[float] = []
                for _ in range(reconnects):
                    resumes = len(dc.resumes)
                    started = time.perf_counter()
                    await dc.drop(code=None)
                    await dc.wait_for(lambda r=resumes: len(dc.resumes) > r and dc.connected)  # type: ignore[misc]
                    times.append(time.perf_counter() - started)
                print(
                    f"reconnect: median {statistics.median(times) * 1000:.1f} ms, "
                    f"max {max(times) * 1000:.1f} ms over {reconnects} dropped sockets "
                    f"({len(dc.identifies)} identify, {len(dc.resumes)} resumes)"
                )
            finally:
                await runtime.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=int, default=1000)
    parser.add_argument("--reconnects", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.count, args.out, args.reconnects, args.rounds))
