"""What truthful channel health costs: database writes per account while messages pour in,
and one read of every account's health (what `habakkuk channels` and the overview do).

An adapter that brings messages as fast as the loop allows (each noted as the gateway
notes it, each with a beat) runs under the real supervisor on a SQLite control.db for
`--seconds`; the channel_status writes are counted. The supervisor writes an account's
beat and activity at most every record_every seconds (1 s for a 4 s silent_limit), so
the writes stay flat whatever the message rate. Then `--reads` reads of six accounts'
health are timed.

    python benchmarks/channel_health_bench.py [--seconds 5] [--reads 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from habakkuk.channels.adapter import Adapter, Address, Beat, Button, InboundMessage, Inbox
from habakkuk.channels.health import ActivityLog, channel_health
from habakkuk.channels.store import Activity, ChannelStore
from habakkuk.channels.supervisor import Supervisor
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.store import SqliteDatabase


class CountingStore(ChannelStore):
    """The channel store, counting the writes of channel_status."""

    writes = 0

    async def record(self, account: str, activity: Activity) -> None:
        CountingStore.writes += 1
        await super().record(account, activity)

    async def set_status(self, *args: Any, **kwargs: Any) -> None:
        CountingStore.writes += 1
        await super().set_status(*args, **kwargs)


class Flood(Adapter):
    """Brings message after message, beating on each, until cancelled."""

    type = "flood"

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        n = 0
        while True:
            n += 1
            await inbox(InboundMessage(self.account, "42", str(n), "42", text="hi"))
            beat()
            if n % 50 == 0:
                await asyncio.sleep(0)

    def render(self, markdown: str) -> list[str]:
        return [markdown]

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        return "1"


def channel(name: str) -> ChannelConfig:
    config = ChannelConfig(type="telegram", token_env="X", poll_timeout=1, silent_limit="4s")
    config.name = name
    config.silent_limit_seconds = 4.0
    return config


async def flood(root: Path, seconds: float) -> tuple[int, int]:
    """Messages noted and channel_status writes in `seconds` of a flooding adapter."""
    db = await SqliteDatabase.open(root / "control.db", MIGRATIONS)
    try:
        store = await CountingStore.open(db)
        activity = ActivityLog()
        messages = 0

        async def inbox(message: InboundMessage) -> None:
            nonlocal messages
            messages += 1
            activity.message_in(message.channel)  # what the gateway does with each

        class Deliveries:
            async def run(self, lease: Any) -> dict[str, Any]:
                return {}

        supervisor = Supervisor(
            {"flood": channel("flood")},
            lambda config: Flood(config.name),
            store,
            JobQueue(db),
            inbox,
            Deliveries(),  # type: ignore[arg-type]  # only run, never called: nothing queued
            activity=activity,
        )
        supervisor.start()
        await asyncio.sleep(seconds)
        await supervisor.stop()
        return messages, CountingStore.writes
    finally:
        await db.close()


async def reads(root: Path, count: int) -> list[float]:
    """Seconds per read of six accounts' health (rows and leases), `count` times."""
    db = await SqliteDatabase.open(root / "reads.db", MIGRATIONS)
    try:
        store = await ChannelStore.open(db)
        configs = {f"acct{i}": channel(f"acct{i}") for i in range(6)}
        for name in configs:
            await store.set_status(name, "telegram", "connected", holder="bench:1:x")
            await store.record(name, Activity(beat=time.time(), last_in=time.time()))
            await store.acquire_lease(f"channel:{name}", "bench:1:x", 600)
        times = []
        for _ in range(count):
            started = time.perf_counter()
            channel_health(configs, await store.statuses(), await store.live_holders())
            times.append(time.perf_counter() - started)
        return times
    finally:
        await db.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--reads", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="habakkuk-channel-health-") as tmp:
        messages, writes = await flood(Path(tmp), args.seconds)
        print(
            f"flood: {messages} messages in {args.seconds:g}s ({messages / args.seconds:,.0f}/s),"
            f" {writes} channel_status writes ({writes / args.seconds:.1f}/s for the account)"
        )
        times = await reads(Path(tmp), args.reads)
        print(
            f"read of 6 accounts' health: median {statistics.median(times) * 1000:.2f} ms,"
            f" p95 {sorted(times)[int(len(times) * 0.95)] * 1000:.2f} ms ({args.reads} reads)"
        )


if __name__ == "__main__":
    asyncio.run(main())
