"""Exactly-once Matrix replies across a real SIGKILL of `habakkuk --serve` (a subprocess)."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import pytest

from habakkuk.channels.matrix_events import encode_id
from tests.channels.fake_matrix import ALICE, BOT, FakeMatrix
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError,)


def config(hs: FakeMatrix) -> str:
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - "the one and only reply"
        agents:
          main:
            model: mock/script
            mode: full
        channels:
          mx:
            type: matrix
            homeserver: {hs.base_url}
            user_id: "{BOT}"
            token_env: MATRIX_TOKEN
            allow_from: ["{ALICE}"]
            poll_timeout: 1
        """
    )


@pytest.mark.timeout(180)
async def test_a_reply_posted_before_the_kill_is_not_posted_again(
    hs: FakeMatrix, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(hs))
    room = hs.room(ALICE)
    hs.hold_sends(0, created=True)  # the reply is posted; its answer never comes back
    first = await serve_process(home, MATRIX_TOKEN=hs.token)
    position = hs.position
    await hs.wait_for(lambda: hs.read_past(position), timeout=BOUND)
    event = hs.say(room, "hello")
    turn = f"turn:mx:{encode_id(room)}:{event['event_id']}"
    await hs.wait_for(lambda: len(hs.of("PUT", "/send/")) == 1, timeout=BOUND)
    await kill(first)
    hs.release_sends()
    assert hs.texts(room) == ["the one and only reply"]

    hs.replay(event)  # the kill may have beaten the position's save: the batch comes again
    second = await serve_process(home, MATRIX_TOKEN=hs.token)
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the resumed delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    position = hs.position
    await hs.wait_for(lambda: hs.read_past(position), timeout=BOUND)  # the replay was read
    await stop(second)
    assert hs.texts(room) == ["the one and only reply"]  # posted once
    assert hs.deduplicated == 1  # the resend carried the same transaction id
    sends = hs.of("PUT", "/send/")
    assert len(sends) == 2 and sends[0].path == sends[1].path
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
