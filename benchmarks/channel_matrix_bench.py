"""The Matrix adapter against its fake homeserver: inbound messages/s to a queued turn,
deliveries/s out, and the reconnect time after the server drops.

The channel service runs as `habakkuk serve` runs it (supervisor, adapter, gateway,
delivery pool) on a fresh home with the mock provider, but without the turn workers:
inbound is measured from the messages' arrival on the homeserver to their turns queued
in control.db (the adapter has synced past them), outbound from queuing N text
deliveries to the N events posted. Targets: >= 200/s each.

Usage: python benchmarks/channel_matrix_bench.py [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from habakkuk.channels.adapter import Address, InboundMessage  # noqa: E402
from habakkuk.channels.deliveries import SENDING, Sending  # noqa: E402
from habakkuk.channels.delivery_types import TextDelivery  # noqa: E402
from habakkuk.channels.matrix import MatrixAdapter  # noqa: E402
from habakkuk.channels.matrix_events import encode_id  # noqa: E402
from habakkuk.channels.store import ChannelStore  # noqa: E402
from habakkuk.engine.channel_config import ChannelConfig  # noqa: E402
from habakkuk.engine.config import parse_config  # noqa: E402
from habakkuk.engine.home import Home  # noqa: E402
from habakkuk.engine.store import SqliteDatabase  # noqa: E402
from habakkuk.engine.timeouts import wait_within  # noqa: E402
from habakkuk.runtime import Runtime  # noqa: E402
from tests.channels.fake_matrix import ALICE, BOT, BOT_TOKEN, FakeMatrix  # noqa: E402

ROOMS = 20


def config(hs: FakeMatrix) -> str:
    return (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/demo\n    mode: full\n"
        "channels:\n  mx:\n    type: matrix\n"
        f"    homeserver: {hs.base_url}\n    user_id: '{BOT}'\n    token_env: MATRIX_TOKEN\n"
        f"    allow_from: ['{ALICE}']\n    poll_timeout: 5\n"
    )


async def turns_queued(runtime: Runtime) -> int:
    rows = await runtime.queue.db.fetchall("SELECT COUNT(*) FROM jobs WHERE kind = 'turn'")
    return int(rows[0][0])


def report(what: str, n: int, wall: float, cpu: float) -> None:
    """Print a rate with the CPU this process spent per item (the fake server's share
    included): on a loaded machine the wall-clock rate says more about the neighbours."""
    print(f"{what}: {n} in {wall:.2f}s = {n / wall:.0f}/s ({cpu / n * 1000:.2f} ms CPU each)")


async def adapter_alone(n: int, tmp: Path) -> None:
    """The adapter without the gateway and the job queue: its own share of each path."""
    async with FakeMatrix() as hs:
        rooms = [hs.room(ALICE) for _ in range(ROOMS)]
        config = ChannelConfig(type="matrix", homeserver=hs.base_url, user_id=BOT)
        config.name = "mx"
        db = await SqliteDatabase.open(tmp / "alone.db", [])
        store = await ChannelStore.open(db)
        adapter = MatrixAdapter(config, BOT_TOKEN, store, tmp / "alone.json")
        got: list[InboundMessage] = []

        async def inbox(message: InboundMessage) -> None:
            got.append(message)

        task = asyncio.create_task(adapter.run(inbox, lambda: None))
        try:
            position = hs.position
            await hs.wait_for(lambda: hs.read_past(position), timeout=60)
            began, cpu = time.perf_counter(), time.process_time()
            for i in range(n):
                hs.say(rooms[i % ROOMS], f"message {i}")
            position = hs.position
            await hs.wait_for(lambda: hs.read_past(position), timeout=120)
            took, used = time.perf_counter() - began, time.process_time() - cpu
            assert len(got) == n
            report("adapter alone, inbound (messages converted)", n, took, used)

            async def send(i: int) -> None:
                to = Address("mx", encode_id(rooms[i % ROOMS]))
                token = SENDING.set(Sending(f"alone:{i}", TextDelivery(to, "x")))
                try:
                    await adapter.send_text(to, adapter.render(f"**reply** {i}")[0])
                finally:
                    SENDING.reset(token)

            began, cpu = time.perf_counter(), time.process_time()
            for start in range(0, n, 4):  # the delivery pool's concurrency
                await asyncio.gather(*(send(i) for i in range(start, min(n, start + 4))))
            took, used = time.perf_counter() - began, time.process_time() - cpu
            report("adapter alone, outbound (sends, 4 at a time)", n, took, used)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await adapter.close()
            await db.close()


async def main(n: int) -> None:
    os.environ["MATRIX_TOKEN"] = BOT_TOKEN
    with tempfile.TemporaryDirectory() as tmp:
        await adapter_alone(n, Path(tmp))
        async with FakeMatrix() as hs:
            home = Home(Path(tmp) / "home")
            home.prepare()
            text = config(hs)
            home.config_path.write_text(text)
            rooms = [hs.room(ALICE) for _ in range(ROOMS)]
            runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
            try:
                service = runtime.channel_service()
                service.start()
                await service.started()
                position = hs.position
                await hs.wait_for(lambda: hs.read_past(position), timeout=60)

                began, cpu = time.perf_counter(), time.process_time()
                for i in range(n):
                    hs.say(rooms[i % ROOMS], f"message {i}")
                position = hs.position
                await hs.wait_for(lambda: hs.read_past(position), timeout=120)
                inbound, used = time.perf_counter() - began, time.process_time() - cpu
                queued = await turns_queued(runtime)
                assert queued == n, f"{queued} turns queued of {n}"
                report("inbound, messages to queued turns", n, inbound, used)

                began, cpu = time.perf_counter(), time.process_time()
                posted = hs.posted
                for i in range(n):
                    to = Address("mx", encode_id(rooms[i % ROOMS]))
                    await service.send_text(f"bench:{i}", to, f"**reply** {i}")
                await hs.wait_for(lambda: hs.posted - posted >= n, timeout=120)
                outbound, used = time.perf_counter() - began, time.process_time() - cpu
                report("outbound, delivery jobs to posted events", n, outbound, used)

                await hs.stop()
                await hs.start()
                began, cpu = time.perf_counter(), time.process_time()
                syncs = len(hs.synced)
                await wait_within(hs.wait_for(lambda: len(hs.synced) > syncs, 120), 130)
                reconnect = time.perf_counter() - began
                print(
                    f"reconnect: syncing again {reconnect:.2f}s after the server came back "
                    "(the supervisor's first backoff is 1 s)"
                )
            finally:
                await runtime.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
