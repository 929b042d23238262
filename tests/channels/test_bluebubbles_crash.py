"""Exactly-once iMessage replies across a real SIGKILL of `habakkuk --serve` (a
subprocess), with the BlueBubbles server resending the webhook to the restarted
process: the part whose answer was lost is found in the chat and not sent again, and a
part that never left is sent once."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.channels.fake_bluebubbles import ALICE, ALICE_CHAT, FakeBlueBubbles
from tests.helpers import eventually
from tests.processes import StartServe, free_port, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


async def delivered(server: FakeBlueBubbles, event: dict[str, Any]) -> bool:
    """The server's webhook POST was taken (200), as it resends until one is."""
    with contextlib.suppress(OSError):
        status, _ = await server.post(event)
        return status == 200
    return False


@pytest.mark.timeout(180)
@pytest.mark.parametrize("reached", [True, False], ids=["answer-lost", "never-sent"])
async def test_a_crash_mid_reply_sends_it_once_and_the_resent_webhook_starts_no_turn(
    tmp_path: Path, serve_process: StartServe, reached: bool
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeBlueBubbles() as server:
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
                  imessage:
                    type: bluebubbles
                    base_url: {server.base_url}
                    password_env: BB_PASSWORD
                    secret_env: BB_SECRET
                    allow_from: ["{ALICE}"]
                """
            )
        )
        server.webhook_url = f"http://127.0.0.1:{port}/channels/imessage"
        env = {"BB_PASSWORD": server.password, "BB_SECRET": server.secret}
        server.hold = asyncio.Event()  # the reply's send hangs until the kill
        server.store_held = reached
        first = await serve_process(home, **env)
        event = server.message(ALICE, "the question")
        await eventually(lambda: delivered(server, event), what="the webhook", timeout=BOUND)
        await eventually(lambda: server.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        server.hold.set()
        server.hold = None
        assert len(server.sent) == int(reached)

        second = await serve_process(home, **env)
        await eventually(lambda: delivered(server, event), what="the resend", timeout=BOUND)
        turn = f"turn:imessage:{ALICE_CHAT}:{event['data']['guid']}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await stop(second)
    assert [(s.chat, s.text) for s in server.sent] == [(ALICE_CHAT, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
