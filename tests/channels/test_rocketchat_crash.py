"""Exactly-once Rocket.Chat replies across a real SIGKILL of `habakkuk --serve` (a
subprocess): the delivery resumes at the first chunk not sent, and the question streamed
again to the restarted process starts no second turn."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_rocketchat import ALICE, BOT_ID, DM_ROOM, TOKEN, FakeRocketChat
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)
# Three paragraphs of about 3,000 characters: three chunks under the adapter's 4,000.
CHUNK = "\n\n".join(["alpha " * 500, "bravo " * 500, "charlie " * 370])


def config(fake: FakeRocketChat) -> str:
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - {json.dumps(CHUNK)}
        agents:
          main:
            model: mock/script
            mode: full
        channels:
          rc:
            type: rocketchat
            base_url: {fake.base_url}
            user_id: {BOT_ID}
            token_env: ROCKETCHAT_TEST_TOKEN
            allow_from: ["{ALICE}"]
        """
    )


def replies(fake: FakeRocketChat) -> list[str]:
    return [m.msg for m in fake.of() if m.user_id == BOT_ID]


@pytest.mark.timeout(180)
async def test_a_kill_mid_reply_resumes_and_a_message_streamed_again_runs_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with FakeRocketChat(ping=0.5) as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(fake))
        fake.hold_sends_after(1)  # chunk 1 goes; chunk 2 hangs until the kill
        first = await serve_process(home, ROCKETCHAT_TEST_TOKEN=TOKEN)
        await fake.wait_for(lambda: fake.subscribed == 1, timeout=BOUND)
        asked = await fake.say("the long answer please")
        await fake.wait_for(lambda: fake.sends == 2, timeout=BOUND)
        await kill(first)
        fake.release()
        assert [text.split()[0] for text in replies(fake)] == ["alpha"]

        second = await serve_process(home, ROCKETCHAT_TEST_TOKEN=TOKEN)
        await fake.wait_for(lambda: fake.subscribed == 2, timeout=BOUND)
        await fake.again(asked)  # the same message once more, to the new process
        turn = f"turn:rc:{DM_ROOM}:{asked.id}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await fake.say("and now?")  # (each process's mock starts its script afresh)
        await fake.wait_for(lambda: len(replies(fake)) == 6, timeout=BOUND)
        await stop(second)
        texts = replies(fake)
        assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"] * 2
        assert " ".join(texts[:3]).split() == CHUNK.split()
        rows = jobs(home)
        assert rows[turn]["attempts"] == 1  # the turn ran once, the repeat was seen
        assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
        assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
