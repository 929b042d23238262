"""Exactly-once LINE replies across a real SIGKILL of `habakkuk --serve` (a subprocess),
with LINE redelivering the event to the restarted process: once when the reply never
left, once when LINE took the push but its answer was lost (the retry key's 409)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.channels.fake_line import ALICE, FakeLine
from tests.helpers import eventually
from tests.processes import StartServe, free_port, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


async def delivered(line: FakeLine, event: dict[str, Any]) -> bool:
    """LINE's POST was taken (200), as it redelivers until one is."""
    with contextlib.suppress(OSError):
        status, _ = await line.events(event)
        return status == 200
    return False


def write_config(home: Path, line: FakeLine, port: int) -> None:
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
              chat:
                type: line
                token_env: LINE_TOKEN
                secret_env: LINE_SECRET
                base_url: {line.base_url}
                allow_from: ["{ALICE}"]
            """
        )
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("lost", ["the reply", "the push's answer"])
async def test_a_crash_mid_reply_sends_it_once_and_the_redelivery_starts_no_turn(
    tmp_path: Path, serve_process: StartServe, lost: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeLine() as line:
        write_config(home, line, port)
        line.webhook_url = f"http://127.0.0.1:{port}/channels/chat"
        env = {"LINE_TOKEN": line.token, "LINE_SECRET": line.secret}
        line.hold = asyncio.Event()  # the reply's send hangs until the kill
        if lost == "the reply":
            event = line.text(ALICE, "the question")
        else:  # no fresh reply token: a push, taken by LINE before its answer is lost
            line.hold_after = True
            message = {"type": "text", "id": "700000000000000042", "text": "the question"}
            event = line.event("message", ALICE, message=message, no_reply_token=True)
        first = await serve_process(home, **env)
        await eventually(lambda: delivered(line, event), what="LINE's POST", timeout=BOUND)
        await eventually(lambda: line.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        line.hold.set()
        line.hold = None
        assert len(line.sent) == (0 if lost == "the reply" else 1)

        second = await serve_process(home, **env)
        # LINE redelivers the event (its answer lost in the crash): taken, no new turn.
        again = {**event, "deliveryContext": {"isRedelivery": True}}
        await eventually(lambda: delivered(line, again), what="the redelivery", timeout=BOUND)
        turn = f"turn:chat:{ALICE}:{event['message']['id']}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await stop(second)
    assert [(s.to, s.text) for s in line.sent] == [(ALICE, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
