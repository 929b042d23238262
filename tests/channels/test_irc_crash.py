"""Exactly-once IRC and Twitch replies across a real SIGKILL of `habakkuk --serve` (a
subprocess), on the fake IRCv3 server (SASL, msgids): the turn runs once, the reply
resumes at the first line not recorded (the one line in flight may come twice: IRC has
no idempotency key), and a message replayed with its id (a bouncer's msgid, Twitch's id
tag) is dropped as seen."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_irc import ALICE, FakeIrc
from tests.channels.twitch_driver import CHANNEL, TWITCH_TOKEN
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError,)
PASSWORD = "s3cret-irc"
# Nine lines: five go in the pacer's burst, the rest one a second: the kill lands mid-reply.
ANSWER = [f"line {n} of the long answer" for n in range(1, 10)]


def channel(kind: str, fake: FakeIrc) -> str:
    if kind == "twitch":
        return (
            f"type: twitch\nserver: 127.0.0.1:{fake.port}\ntls: false\nnick: habakkuk\n"
            f'token_env: TWITCH_TOKEN\njoin: ["{CHANNEL}"]\ngroups: all\nallow_from: ["{ALICE}"]\n'
        )
    return (
        f"type: irc\nserver: 127.0.0.1:{fake.port}\ntls: false\nnick: habakkuk\n"
        f'password_env: IRC_PASSWORD\nallow_from: ["{ALICE}"]\n'
    )


def config(kind: str, fake: FakeIrc) -> str:
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - {json.dumps(chr(10).join(ANSWER))}
        agents:
          main:
            model: mock/script
            mode: full
        channels:
          {kind}:
        """
    ) + textwrap.indent(channel(kind, fake), "    ")


def collapsed(texts: list[str]) -> list[str]:
    """The texts with a line repeated at once counted once."""
    return [text for i, text in enumerate(texts) if i == 0 or texts[i - 1] != text]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["irc", "twitch"])
async def test_a_kill_mid_reply_resumes_after_the_recorded_lines_and_a_replay_is_dropped(
    kind: str, tmp_path: Path, serve_process: StartServe
) -> None:
    twitch = kind == "twitch"
    async with FakeIrc(
        accounts={"habakkuk": PASSWORD}, twitch_token=TWITCH_TOKEN if twitch else ""
    ) as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(kind, fake))
        chat = CHANNEL if twitch else ALICE
        target = CHANNEL if twitch else ""
        env = {"IRC_PASSWORD": PASSWORD, "TWITCH_TOKEN": TWITCH_TOKEN}
        first = await serve_process(home, **env)
        await fake.registered()
        msgid = fake.say("the long answer please", target=target)
        await eventually(lambda: len(fake.texts(chat)) >= 5, what="the burst", timeout=BOUND)
        await kill(first)
        assert len(fake.texts(chat)) < len(ANSWER)  # killed mid-reply

        second = await serve_process(home, **env)
        turn = f"turn:{kind}:{chat}:{msgid}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await fake.registered(2)
        fake.say("the long answer please", msgid=msgid, target=target)  # a replay: seen
        fake.say("and now?", target=target)  # (each process's mock starts its script afresh)
        await eventually(
            lambda: collapsed(fake.texts(chat)) == ANSWER * 2, what="two answers", timeout=BOUND
        )
        await stop(second)
        assert len(fake.texts(chat)) <= 2 * len(ANSWER) + 1  # at most the line in flight twice
        assert fake.logins == ([] if twitch else ["habakkuk", "habakkuk"])  # SASL each time
        rows = jobs(home)
        assert rows[turn]["attempts"] == 1  # the turn ran once
        assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
        assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
