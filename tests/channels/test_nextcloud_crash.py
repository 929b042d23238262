"""Exactly-once Talk replies across a real SIGKILL of `habakkuk --serve` (a subprocess):
the reply's send hangs at the kill, the restarted process sends it once, and the message
Talk's caller resends (signed afresh) starts no second turn."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from tests.channels.fake_talk import ALICE, ROOM, FakeTalk, Webhook, sign
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def delivered(talk: FakeTalk, hook: Webhook, random: str) -> bool:
    """The webhook was taken (200), signed with `random` (a fresh one for each resend)."""
    signed = replace(hook, random=random, signature=sign(talk.secret, random, hook.body))
    with contextlib.suppress(OSError):
        status, _ = await talk.call(signed)
        return status == 200
    return False


@pytest.mark.timeout(180)
async def test_a_crash_mid_reply_sends_it_once_and_the_resent_message_starts_no_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeTalk() as talk:
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
                  talk:
                    type: nextcloud
                    base_url: {talk.base_url}
                    token_env: TALK_SECRET
                    allow_from: ["{ALICE}"]
                """
            )
        )
        talk.webhook_url = f"http://127.0.0.1:{port}/channels/talk"
        env = {"TALK_SECRET": talk.secret}
        talk.hold = asyncio.Event()  # the reply's send hangs until the kill
        first = await serve_process(home, **env)
        hook = talk.message("the question")
        await eventually(lambda: delivered(talk, hook, "a" * 64), what="the webhook", timeout=BOUND)
        await eventually(lambda: talk.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        talk.hold.set()
        talk.hold = None
        assert talk.posted == []
        second = await serve_process(home, **env)
        await eventually(lambda: delivered(talk, hook, "b" * 64), what="the resend", timeout=BOUND)
        turn = f"turn:talk:{ROOM}:1001"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await stop(second)
    assert [(p.room, p.message) for p in talk.posted] == [(ROOM, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
