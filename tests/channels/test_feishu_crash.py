"""Exactly-once Feishu replies across a real SIGKILL of `habakkuk --serve` (a subprocess):
the reply was posted but its answer lost in the crash, Feishu redelivers the event to the
restarted process, and the retried send's uuid makes Feishu return the message it made."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.channels.fake_feishu import ALICE, FakeFeishu, FeishuDriver
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def delivered(feishu: FakeFeishu, event: dict[str, Any]) -> bool:
    """Feishu's POST was taken (200), as it retries until one is."""
    with contextlib.suppress(OSError):
        status, _ = await feishu.post(event)
        return status == 200
    return False


@pytest.mark.timeout(180)
async def test_a_crash_after_the_post_sends_it_once_and_the_redelivered_event_starts_no_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeFeishu() as feishu:
        driver = FeishuDriver(feishu)
        entry = textwrap.indent(driver.channel_yaml("lark"), "    ")
        (home / "config.yaml").write_text(
            textwrap.dedent(
                f"""
                providers:
                  mock:
                    type: mock
                    script:
                      - "the answer"
                agents:
                  main:
                    model: mock/script
                    mode: full
                http:
                  listen: 127.0.0.1:{port}
                channels:
                  lark:
                """
            )
            + entry
        )
        driver.called_at(f"http://127.0.0.1:{port}/channels/lark")
        env = driver.env()
        feishu.hold = asyncio.Event()  # the reply is posted, its answer hangs until the kill
        first = await serve_process(home, **env)
        event = feishu.message_event(ALICE, "the question")
        await eventually(lambda: delivered(feishu, event), what="Feishu's POST", timeout=BOUND)
        await eventually(lambda: feishu.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        feishu.hold.set()
        feishu.hold = None
        assert driver.texts() == ["the answer"]  # Feishu made the message; we never heard

        second = await serve_process(home, **env)
        # Feishu retries the event (its answer lost in the crash): taken, no new turn.
        await eventually(lambda: delivered(feishu, event), what="the redelivery", timeout=BOUND)
        message_id = event["event"]["message"]["message_id"]
        chat = event["event"]["message"]["chat_id"]
        turn = f"turn:lark:{chat}:{message_id}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await stop(second)
    # The retried send carried the same uuid: Feishu returned the message it had made.
    assert driver.texts() == ["the answer"]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
