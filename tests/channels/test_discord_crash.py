"""Exactly once on Discord across a real SIGKILL of `habakkuk --serve` (a subprocess)."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_discord import BOT_TOKEN, DM_CHANNEL, USER_ID, FakeDiscord
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)
CHUNKS = "\n\n".join(["alpha " * 300, "bravo " * 300, "charlie " * 200])


def config(dc: FakeDiscord, script: str) -> str:
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - {script}
        agents:
          main:
            model: mock/script
            mode: full
        channels:
          dc:
            type: discord
            token_env: DISCORD_TOKEN
            base_url: {dc.base_url}
            allow_from: ["{USER_ID}"]
        """
    )


@pytest.mark.timeout(180)
async def test_a_crash_after_discord_made_a_chunk_unheard_sends_it_once(
    dc: FakeDiscord, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(dc, json.dumps(CHUNKS)))
    # Chunk 1 goes out; chunk 2 is made by Discord but its answer never reaches the bot.
    dc.hold_sends_after(1, made=True)
    first = await serve_process(home, DISCORD_TOKEN=BOT_TOKEN)
    sent = dc.message("the long answer please")
    await dc.wait_for(lambda: len(dc.of("create_message", answered=None)) == 2, timeout=BOUND)
    await kill(first)
    dc.release_sends()
    await dc.wait_for(lambda: len(dc.made()) == 2)
    turn = f"turn:dc:{DM_CHANNEL}:{sent['id']}"

    second = await serve_process(home, DISCORD_TOKEN=BOT_TOKEN)
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await stop(second)
    # The retried chunk 2 carried the same nonce: Discord answered with the message it had.
    made = dc.made()
    assert [t.split()[0] for t in made] == ["alpha", "bravo", "charlie"]
    assert " ".join(made).split() == CHUNKS.split()
    nonces = [c.body["nonce"] for c in dc.of("create_message", answered=None)]
    assert len(nonces) == 4 and nonces[1] == nonces[2] and len(set(nonces)) == 3
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1 and rows[f"reply:{turn}"]["attempts"] == 2
    assert len(dc.identifies) == 1 and len(dc.resumes) == 1  # the restart resumed


@pytest.mark.timeout(180)
async def test_what_arrives_while_killed_is_replayed_by_the_resume_and_answered_once(
    dc: FakeDiscord, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(dc, "'echo: {input}'"))
    first = await serve_process(home, DISCORD_TOKEN=BOT_TOKEN)
    hello = dc.message("hello")
    await dc.wait_for(lambda: dc.texts() == ["echo: hello"], timeout=BOUND)
    await kill(first)
    await dc.wait_for(lambda: not dc.connected)
    dc.message("while you were down")
    dc.replay(hello)  # and a redelivery of what was already answered
    second = await serve_process(home, DISCORD_TOKEN=BOT_TOKEN)
    await dc.wait_for(lambda: len(dc.texts()) == 2, timeout=BOUND)
    await dc.wait_for(lambda: dc.connected and dc.session is not None, timeout=BOUND)
    after = dc.message("after the restart")
    await dc.wait_for(lambda: len(dc.texts()) == 3, timeout=BOUND)
    await eventually(
        lambda: jobs(home)[f"reply:turn:dc:{DM_CHANNEL}:{after['id']}"]["status"] == "done",
        what="the last delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await stop(second)
    assert dc.texts() == ["echo: hello", "echo: while you were down", "echo: after the restart"]
    assert len(dc.identifies) == 1 and len(dc.resumes) == 1
    assert len([j for j in jobs(home).values() if j["kind"] == "turn"]) == 3
