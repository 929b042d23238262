"""Exactly-once WeCom replies across a real SIGKILL of `habakkuk --serve` (a
subprocess): the reply's send hangs until the kill, the message comes again to the
restarted process, which starts no second turn and sends the reply once."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_wecom import ALICE, FakeWeCom, WeComDriver
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def delivered(fake: FakeWeCom, message: bytes) -> bool:
    """WeCom's POST was taken (200), as it retries until one is."""
    with contextlib.suppress(OSError):
        status, _ = await fake.post(message)
        return status == 200
    return False


@pytest.mark.timeout(180)
async def test_a_crash_mid_reply_sends_it_once_and_the_message_again_starts_no_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeWeCom() as fake:
        driver = WeComDriver(fake)
        entry = textwrap.indent(driver.channel_yaml("work"), "    ")
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
                  work:
                """
            )
            + entry
        )
        driver.called_at(f"http://127.0.0.1:{port}/channels/work")
        env = driver.env()
        fake.hold = asyncio.Event()  # the reply's send hangs until the kill
        first = await serve_process(home, **env)
        message = fake.message(ALICE, "the question", msg_id="7000000000000000001")
        await eventually(lambda: delivered(fake, message), what="the POST", timeout=BOUND)
        await eventually(lambda: fake.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        fake.hold.set()
        fake.hold = None
        assert fake.sent == []

        second = await serve_process(home, **env)
        await eventually(lambda: delivered(fake, message), what="the message again", timeout=BOUND)
        turn = f"turn:work:{ALICE}:7000000000000000001"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await stop(second)
    assert [(s.to, s.content["content"]) for s in fake.sent] == [(ALICE, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
