"""Exactly-once Mattermost replies across a real SIGKILL of `habakkuk --serve` (a
subprocess): the server stores the second chunk but its answer never comes; the
restarted process (later than the server's 30 seconds of pending post ids) finds that
chunk by its key instead of posting it again and resumes at the third, fetches the posts
of the channel since the last one it saw (none to run again), and the question sent
again to it starts no second turn."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_mattermost import ALICE, BOT_ID, DM_CHANNEL, TOKEN, FakeMattermost
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)
# Three paragraphs of about 3,000 characters: three chunks under the adapter's 4,000.
CHUNK = "\n\n".join(["alpha " * 500, "bravo " * 500, "charlie " * 370])


def config(fake: FakeMattermost) -> str:
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
          mm:
            type: mattermost
            base_url: {fake.base_url}
            token_env: MATTERMOST_TEST_TOKEN
            allow_from: ["{ALICE}"]
        """
    )


def replies(fake: FakeMattermost) -> list[str]:
    return [p.message for p in fake.of() if p.user_id == BOT_ID]


@pytest.mark.timeout(180)
async def test_a_kill_mid_reply_resumes_and_a_post_sent_again_runs_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with FakeMattermost() as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(fake))
        fake.hold_sends_after(1, stored=True)  # chunk 2 is stored; its answer hangs
        first = await serve_process(home, MATTERMOST_TEST_TOKEN=TOKEN)
        await fake.wait_for(lambda: fake.authenticated == 1, timeout=BOUND)
        asked = await fake.say("the long answer please")
        await fake.wait_for(lambda: fake.sends == 2, timeout=BOUND)
        await kill(first)
        fake.release()
        fake.forget_pending()
        assert [text.split()[0] for text in replies(fake)] == ["alpha", "bravo"]

        second = await serve_process(home, MATTERMOST_TEST_TOKEN=TOKEN)
        await fake.wait_for(lambda: fake.authenticated == 2, timeout=BOUND)
        await fake.again(asked)  # the same post once more, to the new process
        turn = f"turn:mm:{DM_CHANNEL}:{asked.id}"
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
        # the restart's catch-up, and the look for the chunk the kill cut short
        assert [channel for channel, _ in fake.fetches] == [DM_CHANNEL, DM_CHANNEL]
        rows = jobs(home)
        assert rows[turn]["attempts"] == 1  # the turn ran once, the repeat was seen
        assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
        assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
