"""Slack adapter throughput against the fake Slack (tests/channels/fake_slack.py).

- inbound: DMs pushed down the Socket Mode socket, through the adapter and the gateway
  to a queued turn (the envelope's acknowledgement is sent after the durable hand-off,
  so "all acknowledged" is the end), in messages/s; no turn worker runs.
- outbound: text deliveries queued, each sent with chat.postMessage and recorded, in
  deliveries/s (to one chat, where they go one after another in order, and to 8 chats,
  which the account's delivery pool of 4 sends side by side).
- the adapter alone: chat.postMessage calls one after another, without the delivery
  queue (what the adapter adds to a delivery).
- reconnect: the fake drops the socket; the time until a new socket is open, and until a
  message written right after the drop is handed over (median of the rounds).

    PYTHONPATH=. python benchmarks/channel_slack_bench.py [--messages 1000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import fresh_home, mock_config

from tests.channels.fake_slack import DM, PERSON, TEAM, FakeSlack


async def until(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    """Poll `predicate()` (the fake's state has no event for these counts) within a bound."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        await asyncio.sleep(0.002)


async def main(messages: int, rounds: int) -> None:
    from habakkuk.channels.adapter import Address
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime

    async with FakeSlack() as slack:
        os.environ["SLACK_APP_TOKEN"] = slack.app_token
        os.environ["SLACK_BOT_TOKEN"] = slack.bot_token
        channel = (
            "channels:\n  sl:\n    type: slack\n    app_token_env: SLACK_APP_TOKEN\n"
            "    bot_token_env: SLACK_BOT_TOKEN\n"
            f"    base_url: {slack.base_url}\n    allow_from: '*'\n    silent_limit: 40s\n"
        )
        with tempfile.TemporaryDirectory(prefix="habakkuk-slack-bench-") as tmp:
            home = fresh_home(tmp, mock_config(extra=channel))
            config = parse_config(home.config_path.read_text(), home.config_path, home)
            runtime = await Runtime.open(home, config)
            try:
                service = runtime.channel_service()
                service.start()
                await service.started()
                await until(lambda: service.supervisor.adapter("sl") is not None)

                # inbound
                started = time.perf_counter()
                for i in range(messages):
                    slack.message(f"message {i}", channel=f"D{i % 50:04d}", user=f"U{i % 50:04d}")
                await until(lambda: len(slack.acks) >= messages)
                inbound = messages / (time.perf_counter() - started)
                queued = await runtime.queue.db.fetchone(
                    "SELECT count(*) FROM jobs WHERE kind = 'turn'"
                )
                assert queued is not None and queued[0] == messages, queued

                # outbound
                figures = {}
                for chats in (1, 8):
                    before = len(slack.posted)
                    started = time.perf_counter()
                    for i in range(messages):
                        to = f"sl:{TEAM}-D9{i % chats:03d}"
                        await service.send_text(f"bench:{chats}:{i}", to, f"reply {i}")
                    await until(lambda b=before: len(slack.posted) - b >= messages)
                    figures[chats] = messages / (time.perf_counter() - started)

                # the adapter alone: chat.postMessage calls one after another, no queue
                adapter = service.supervisor.adapter("sl")
                assert adapter is not None
                started = time.perf_counter()
                for i in range(messages):
                    await adapter.send_text(Address("sl", f"{TEAM}-D9000"), f"direct {i}")
                direct = messages / (time.perf_counter() - started)

                # reconnect
                to_socket, to_message = [], []
                for _ in range(rounds):
                    connections, acked = slack.connections, len(slack.acks)
                    started = time.perf_counter()
                    await slack.drop()
                    slack.message("after the drop", channel=DM, user=PERSON)
                    await until(lambda c=connections: slack.connections > c)
                    to_socket.append(time.perf_counter() - started)
                    await until(lambda a=acked: len(slack.acks) > a)
                    to_message.append(time.perf_counter() - started)
            finally:
                await runtime.close()
    print(f"inbound:   {inbound:8.0f} messages/s to a queued turn ({messages} DMs, 50 chats)")
    print(f"outbound:  {figures[1]:8.0f} deliveries/s to one chat (in order)")
    print(f"outbound:  {figures[8]:8.0f} deliveries/s to 8 chats")
    print(f"adapter:   {direct:8.0f} chat.postMessage/s, the adapter alone (no delivery queue)")
    print(
        f"reconnect: {statistics.median(to_socket) * 1000:8.1f} ms to a new socket, "
        f"{statistics.median(to_message) * 1000:.1f} ms to the next message handed over "
        f"(median of {rounds}; slowest {max(to_message) * 1000:.1f} ms)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    # the adapter reopens a dropped socket at once up to 5 times a minute; more rounds
    # measure the supervisor's backoff (1 s) instead
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.rounds))
