"""What is posted to Rocket.Chat while Habakkuk is down is answered once it is back, with
real `habakkuk --serve` processes (SIGKILL) on the fake server: the realtime stream
replays nothing, so the adapter reads each room's history from the position it keeps in
channels/rocketchat-<account>.json; a message read again (the kill came before the
position was saved) starts no second turn."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_rocketchat import (
    ALICE,
    BOT_ID,
    BOT_USER,
    DM_ROOM,
    TOKEN,
    FakeRocketChat,
)
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


def config(fake: FakeRocketChat) -> str:
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - "echo: {{input}}"
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


def replies(fake: FakeRocketChat, rid: str = DM_ROOM) -> list[str]:
    return [m.msg for m in fake.of(rid) if m.user_id == BOT_ID]


@pytest.mark.timeout(180)
async def test_messages_posted_while_down_are_answered_once_after_the_restart(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with FakeRocketChat(ping=0.5) as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(fake))
        first = await serve_process(home, ROCKETCHAT_TEST_TOKEN=TOKEN)
        await fake.wait_for(lambda: fake.subscribed == 1, timeout=BOUND)
        before = await fake.say("before")
        await fake.wait_for(lambda: replies(fake) == ["echo: before"], timeout=BOUND)
        state = home / "channels" / "rocketchat-rc.json"
        await eventually(
            lambda: json.loads(state.read_text())["since"] > before.ts,  # past its reply
            what="the position to pass the reply",
            timeout=BOUND,
            ignore=(OSError, ValueError, KeyError),
        )
        assert state.stat().st_mode & 0o777 == 0o600
        await kill(first)
        # As if the kill had come between the gateway taking "before" and the save.
        state.write_text(json.dumps({"since": before.ts}))

        away = await fake.say("while you were away")
        mention = f"@{BOT_USER} and in here?"
        await fake.say(mention, rid="GENERAL", room_type="c", mentions=[BOT_ID])
        await fake.say("just chatting", rid="GENERAL", room_type="c")  # not for the bot
        second = await serve_process(home, ROCKETCHAT_TEST_TOKEN=TOKEN)
        await fake.wait_for(lambda: fake.subscribed == 2, timeout=BOUND)
        await fake.wait_for(
            lambda: replies(fake) == ["echo: before", "echo: while you were away"], timeout=BOUND
        )
        await fake.wait_for(lambda: replies(fake, "GENERAL") == ["echo: and in here?"])
        await fake.say("and now?")  # the stream, after what was read back
        await fake.wait_for(lambda: len(replies(fake)) == 3, timeout=BOUND)
        await stop(second)

        assert replies(fake) == ["echo: before", "echo: while you were away", "echo: and now?"]
        assert replies(fake, "GENERAL") == ["echo: and in here?"]
        assert {("im.history", DM_ROOM), ("channels.history", "GENERAL")} <= set(fake.history_reads)
        rows = jobs(home)
        assert len([r for r in rows.values() if r["kind"] == "turn"]) == 4
        assert rows[f"turn:rc:{DM_ROOM}:{before.id}"]["attempts"] == 1  # read again, not run
        assert rows[f"turn:rc:{DM_ROOM}:{away.id}"]["status"] == "done"
        assert json.loads(state.read_text())["since"] > away.ts
