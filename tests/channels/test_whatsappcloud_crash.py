"""Exactly-once WhatsApp Cloud replies across a real SIGKILL of `habakkuk --serve` (a
subprocess), with Meta redelivering the event to the restarted process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.channels.fake_graph import ALICE, FakeWhatsAppCloud, WhatsAppCloudDriver, text_of
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def delivered(fake: FakeWhatsAppCloud, event: dict[str, Any]) -> bool:
    """Meta's POST was taken (200), as it retries until one is."""
    with contextlib.suppress(OSError):
        status, _ = await fake.post(event)
        return status == 200
    return False


@pytest.mark.timeout(180)
async def test_a_crash_mid_reply_sends_it_once_and_the_redelivered_event_starts_no_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeWhatsAppCloud() as fake:
        driver = WhatsAppCloudDriver(fake)
        entry = textwrap.indent(driver.channel_yaml("biz"), " " * 20)
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
                  biz:
{entry}
                """
            )
        )
        fake.webhook_url = f"http://127.0.0.1:{port}/channels/biz"
        env = driver.env()
        fake.hold = asyncio.Event()  # the reply's send hangs until the kill
        first = await serve_process(home, **env)
        event = fake.text(ALICE, "the question")
        wamid = event["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        await eventually(lambda: delivered(fake, event), what="Meta's POST", timeout=BOUND)
        await eventually(lambda: fake.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        fake.hold.set()
        fake.hold = None
        assert fake.sent == []

        second = await serve_process(home, **env)
        # Meta retries the event (its answer lost in the crash): taken, no new turn.
        await eventually(lambda: delivered(fake, event), what="the redelivery", timeout=BOUND)
        turn = f"turn:biz:{ALICE}:{wamid}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await stop(second)
    assert [(s.to, text_of(s)) for s in fake.sent] == [(ALICE, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
    # the window survived the crash in its state file
    assert ALICE in (home / "channels" / "whatsappcloud-biz.json").read_text()
