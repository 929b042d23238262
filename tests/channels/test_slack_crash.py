"""Exactly-once Slack replies across a real SIGKILL of `habakkuk --serve` (a subprocess)."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_slack import DM, TEAM, FakeSlack
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)
# three paragraphs of 3000 characters: three chunks under Slack's section limit
CHUNK = "\n\n".join(["alpha " * 499 + "alpha", "bravo " * 499 + "bravo", "charlie " * 374])


def config(slack: FakeSlack, reply: str) -> str:
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - {json.dumps(reply)}
        agents:
          main:
            model: mock/script
            mode: full
        channels:
          sl:
            type: slack
            app_token_env: SLACK_APP_TOKEN
            bot_token_env: SLACK_BOT_TOKEN
            base_url: {slack.base_url}
            allow_from: ["U0042"]
        """
    )


@pytest.mark.timeout(180)
async def test_a_crash_mid_delivery_resumes_and_the_redelivered_envelope_is_dropped(
    slack: FakeSlack, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(slack, CHUNK))
    tokens = {"SLACK_APP_TOKEN": slack.app_token, "SLACK_BOT_TOKEN": slack.bot_token}
    slack.hold_posts_after(1)  # chunk 1 goes out; chunk 2 hangs until the kill
    first = await serve_process(home, **tokens)
    envelope = slack.message("the long answer please")
    await slack.wait_for(lambda: len(slack.of("chat.postMessage", answered=None)) == 2, 60)
    await kill(first)
    slack.release_posts()
    assert [t.split()[0] for t in slack.texts()] == ["alpha"]
    # Slack sends the message again (as when an acknowledgement was lost in the crash).
    again = slack.replay(envelope)

    second = await serve_process(home, **tokens)
    await slack.wait_for(lambda: len(slack.texts()) == 3, timeout=BOUND)
    await slack.wait_for(lambda: again["envelope_id"] in slack.acks, timeout=BOUND)
    turn = f"turn:sl:{TEAM}-{DM}:{envelope['payload']['event']['ts']}"
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await stop(second)
    texts = slack.texts()
    assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"]
    assert " ".join(texts).split() == CHUNK.split()
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]  # the replay started none
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once


@pytest.mark.timeout(180)
async def test_a_crash_after_slack_posted_a_chunk_unheard_posts_it_once(
    slack: FakeSlack, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(slack, CHUNK))
    tokens = {"SLACK_APP_TOKEN": slack.app_token, "SLACK_BOT_TOKEN": slack.bot_token}
    # Chunk 1 goes out; chunk 2 is posted by Slack but its answer never reaches the bot.
    slack.hold_posts_after(1, made=True)
    first = await serve_process(home, **tokens)
    envelope = slack.message("the long answer please")
    await slack.wait_for(lambda: len(slack.texts()) == 2, 60)
    await kill(first)
    slack.release_posts()
    turn = f"turn:sl:{TEAM}-{DM}:{envelope['payload']['event']['ts']}"

    second = await serve_process(home, **tokens)
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await stop(second)
    # The resumed chunk 2 was found by its metadata in the DM's history, not posted again.
    texts = slack.texts()
    assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"]
    assert " ".join(texts).split() == CHUNK.split()
    delivery = f"reply:{turn}"
    assert [p.metadata["event_payload"] for p in slack.posted] == [
        {"delivery": delivery, "chunk": i} for i in range(3)
    ]
    [looked] = slack.of("conversations.history")
    assert looked.params["channel"] == DM and looked.params["include_all_metadata"] is True
    assert len(slack.of("chat.postMessage", answered=None)) == 3
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1 and rows[delivery]["attempts"] == 2
