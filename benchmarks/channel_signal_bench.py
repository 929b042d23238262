"""The Signal adapter against the fake signal-cli daemon (tests/channels/fake_signal.py):
messages per second the adapter reads off the daemon's event stream (its own inbound
path, handed to a bare inbox), the same through the gateway to a queued turn (with the
turns running meanwhile) from one person and then from 16 at once (each chat's in
order, different chats' concurrently), deliveries per second out through JSON-RPC
`send`, and the time to reopen the event stream after the daemon drops it (at once) or
goes down for a moment (the supervisor's backoff).

Run: `PYTHONPATH=. python benchmarks/channel_signal_bench.py [messages] [deliveries]`.
Targets: >= 200 messages/s in, >= 200 deliveries/s out.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fresh_home, mock_config
from tests.channels.fake_signal import ALICE_UUID, BOT_NUMBER, FakeSignal


def count(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def idle(db: Path) -> bool:
    """No job queued or running (the turns and their replies are done)."""
    return count(db, "SELECT COUNT(*) FROM jobs WHERE status IN ('queued', 'running')") == 0


async def until(condition: Callable[[], object], bound: float = 120.0) -> None:
    """Poll `condition` (rows another task commits, a fake's state: nothing to await)."""
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark's condition never held")
        await asyncio.sleep(0.005)


async def adapter_only(messages: int) -> None:
    """The adapter alone: SSE lines to InboundMessages handed to an inbox that keeps them."""
    from habakkuk.channels.adapter import Address, InboundMessage
    from habakkuk.channels.signal import SignalAdapter
    from habakkuk.engine.channel_config import ChannelConfig

    async with FakeSignal(keepalive=15.0) as fake:
        config = ChannelConfig(type="signal", base_url=fake.base_url, account=BOT_NUMBER)
        config.name = "sig"
        adapter = SignalAdapter(config)
        got: list[InboundMessage] = []

        async def inbox(message: InboundMessage) -> None:
            got.append(message)

        task = asyncio.create_task(adapter.run(inbox, lambda: None))
        try:
            await until(lambda: bool(fake.streams))
            started = time.perf_counter()
            for index in range(messages):
                fake.message(f"message {index}")
            await until(lambda: len(got) >= messages)
            took = time.perf_counter() - started
            print(
                f"in (adapter): {messages} envelopes read and converted in {took:.2f}s = "
                f"{messages / took:.0f}/s"
            )
            to = Address("sig", ALICE_UUID)
            chunk = adapter.render("**styled** text")[0]
            started = time.perf_counter()
            for _ in range(messages // 40):
                await asyncio.gather(*(adapter.send_text(to, chunk) for _ in range(4)))
            took = time.perf_counter() - started
            sends = messages // 40 * 4
            print(
                f"out (adapter): {sends} sends, 4 at a time, in {took:.2f}s = {sends / took:.0f}/s"
            )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await adapter.close()


async def main(messages: int, deliveries: int) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime

    await adapter_only(messages * 10)
    async with FakeSignal(keepalive=15.0) as fake:
        with tempfile.TemporaryDirectory() as root:
            channel = (
                "channels:\n  sig:\n    type: signal\n"
                f"    base_url: {fake.base_url}\n    account: '{BOT_NUMBER}'\n"
                "    allow_from: '*'\n"
            )
            home = fresh_home(root, mock_config(mode="full", extra=channel))
            config = parse_config(home.config_path.read_text(), home.config_path, home)
            runtime = await Runtime.open(home, config)
            try:
                runtime.start_workers()
                assert runtime.channels is not None
                await runtime.channels.started()
                await until(lambda: bool(fake.streams))
                db = home.db_path("control")

                # -- in: envelopes to queued turns ------------------------------------
                started = time.perf_counter()
                for index in range(messages):
                    fake.message(f"message {index}")
                await until(
                    lambda: count(db, "SELECT COUNT(*) FROM jobs WHERE kind = 'turn'") >= messages
                )
                inbound = time.perf_counter() - started
                print(
                    f"in (gateway): {messages} messages to queued turns in {inbound:.2f}s = "
                    f"{messages / inbound:.0f}/s"
                )
                await until(lambda: idle(db), bound=600)

                # -- in: the same from 16 people at once (each chat's lane in order) ----
                people = [f"{i:08x}-0000-4000-8000-0000000000aa" for i in range(16)]
                started = time.perf_counter()
                for index in range(messages):
                    fake.message(
                        f"message {index}", uuid=people[index % 16], number=None, name="Bench"
                    )
                await until(
                    lambda: (
                        count(db, "SELECT COUNT(*) FROM jobs WHERE kind = 'turn'") >= 2 * messages
                    )
                )
                inbound = time.perf_counter() - started
                print(
                    f"in (gateway, 16 chats): {messages} messages to queued turns in "
                    f"{inbound:.2f}s = {messages / inbound:.0f}/s"
                )
                # let those turns and their replies finish before timing deliveries
                await until(lambda: idle(db), bound=600)

                # -- out: deliveries through JSON-RPC send -----------------------------
                sent_before = len(fake.sent)
                chats = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(16)]
                chats[0] = ALICE_UUID
                started = time.perf_counter()
                for index in range(deliveries):
                    chat = chats[index % len(chats)]
                    await runtime.channels.send_text(
                        f"bench:{index}", f"sig:{chat}", f"**delivery** {index}"
                    )
                await until(lambda: len(fake.sent) - sent_before >= deliveries)
                outbound = time.perf_counter() - started
                print(
                    f"out (delivery worker): {deliveries} deliveries sent in {outbound:.2f}s = "
                    f"{deliveries / outbound:.0f}/s (16 chats, 4 at a time)"
                )

                # -- reconnects -------------------------------------------------------
                opened = fake.connections
                started = time.perf_counter()
                fake.drop_streams()
                await until(lambda: fake.connections > opened and bool(fake.streams))
                print(f"reconnect after a dropped stream: {time.perf_counter() - started:.3f}s")
                opened = fake.connections
                started = time.perf_counter()
                await fake.stop()
                await fake.start()
                await until(lambda: fake.connections > opened and bool(fake.streams))
                print(
                    "reconnect after the daemon restarted: "
                    f"{time.perf_counter() - started:.3f}s (the supervisor's first backoff 1 s)"
                )
            finally:
                await runtime.close()


if __name__ == "__main__":
    count_in = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    count_out = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    asyncio.run(main(count_in, count_out))
