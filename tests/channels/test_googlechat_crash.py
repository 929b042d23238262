"""Exactly-once Google Chat replies across a real SIGKILL of `habakkuk --serve` (a
subprocess): the message is created but its answer is lost in the crash; the restarted
process creates it again under the same client message id, which Google Chat refuses as
ALREADY_EXISTS, so the person sees one message; the redelivered event starts no turn."""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.channels.fake_googlechat import ALICE, DM, PROJECT, FakeGoogleChat
from tests.channels.test_sms_crash import BOUND, NOT_YET, free_port
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop


async def delivered(chat: FakeGoogleChat, event: dict[str, Any]) -> bool:
    """Google Chat's POST was taken (200), as it retries until one is."""
    with contextlib.suppress(OSError):
        status, _ = await chat.post(event)
        return status == 200
    return False


@pytest.mark.timeout(180)
async def test_a_crash_after_the_create_leaves_one_message_and_no_second_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeGoogleChat() as chat:
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
                    type: googlechat
                    audience: '{PROJECT}'
                    key_file: {chat.key_file}
                    base_url: {chat.base_url}
                    allow_from: ["{ALICE}"]
                """
            )
        )
        chat.webhook_url = f"http://127.0.0.1:{port}/channels/chat"
        chat.hold = asyncio.Event()  # the create is made; its answer hangs until the kill
        first = await serve_process(home)
        event = chat.event("the question")
        await eventually(lambda: delivered(chat, event), what="the POST", timeout=BOUND)
        await eventually(lambda: chat.held == 1, what="the reply's create", timeout=BOUND)
        await kill(first)
        chat.hold.set()
        chat.hold = None

        second = await serve_process(home)
        message_id = event["message"]["name"].rsplit("/", 1)[-1]
        turn = f"turn:chat:{DM.split('/')[1]}:{message_id}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await eventually(lambda: delivered(chat, event), what="the redelivery", timeout=BOUND)
        await stop(second)
    assert [(c.space, c.text) for c in chat.created] == [(DM, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
