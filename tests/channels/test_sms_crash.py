"""Exactly-once SMS replies across a real SIGKILL of `habakkuk --serve` (a subprocess),
with Twilio redelivering the message to the restarted process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_twilio import ALICE, BOT_NUMBER, FakeTwilio
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def delivered(twilio: FakeTwilio, params: list[tuple[str, str]]) -> bool:
    """Twilio's POST was taken (200), as it retries until one is."""
    with contextlib.suppress(OSError):
        status, _ = await twilio.post(params)
        return status == 200
    return False


@pytest.mark.timeout(180)
async def test_a_crash_mid_reply_sends_it_once_and_the_redelivered_message_starts_no_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeTwilio() as twilio:
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
                  text:
                    type: sms
                    account_sid: {twilio.sid}
                    token_env: TWILIO_AUTH_TOKEN
                    from: "{BOT_NUMBER}"
                    base_url: {twilio.base_url}
                    allow_from: ["{ALICE}"]
                """
            )
        )
        twilio.webhook_url = f"http://127.0.0.1:{port}/channels/text"
        env = {"TWILIO_AUTH_TOKEN": twilio.token}
        twilio.hold = asyncio.Event()  # the reply's send hangs until the kill
        first = await serve_process(home, **env)
        message = twilio.message(ALICE, "the question")
        await eventually(lambda: delivered(twilio, message), what="Twilio's POST", timeout=BOUND)
        await eventually(lambda: twilio.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        twilio.hold.set()
        twilio.hold = None
        assert twilio.sent == []

        second = await serve_process(home, **env)
        # Twilio retries the message (its answer lost in the crash): taken, no new turn.
        await eventually(lambda: delivered(twilio, message), what="the redelivery", timeout=BOUND)
        turn = f"turn:text:{ALICE}:{message[0][1]}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await stop(second)
    assert [(s.to, s.body) for s in twilio.sent] == [(ALICE, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
