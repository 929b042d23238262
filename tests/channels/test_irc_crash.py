"""Exactly-once IRC replies across a real SIGKILL of `habakkuk --serve` (a subprocess), on
the fake IRCv3 server (SASL, msgids): the turn runs once, the reply resumes at the first
line not recorded (the one line in flight may come twice: IRC has no idempotency key),
and a message a bouncer replays with its msgid is dropped as seen."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_irc import ALICE, FakeIrc
from tests.helpers import eventually
from tests.processes import StartServe, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError,)
PASSWORD = "s3cret-irc"
# Nine lines: five go in the pacer's burst, the rest one a second: the kill lands mid-reply.
ANSWER = [f"line {n} of the long answer" for n in range(1, 10)]


def config(fake: FakeIrc) -> str:
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
          irc:
            type: irc
            server: 127.0.0.1:{fake.port}
            tls: false
            nick: habakkuk
            password_env: IRC_PASSWORD
            allow_from: ["{ALICE}"]
        """
    )


def jobs(home: Path) -> dict[str, sqlite3.Row]:
    path = home / "control.db"
    if not path.exists():
        return {}
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        return {r["id"]: r for r in conn.execute("SELECT * FROM jobs").fetchall()}


def collapsed(texts: list[str]) -> list[str]:
    """The texts with a line repeated at once counted once."""
    return [text for i, text in enumerate(texts) if i == 0 or texts[i - 1] != text]


@pytest.mark.timeout(180)
async def test_a_kill_mid_reply_resumes_after_the_recorded_lines_and_a_replay_is_dropped(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with FakeIrc(accounts={"habakkuk": PASSWORD}) as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(fake))
        first = await serve_process(home, IRC_PASSWORD=PASSWORD)
        await fake.registered()
        msgid = fake.say("the long answer please")
        await eventually(lambda: len(fake.texts()) >= 5, what="the burst", timeout=BOUND)
        await kill(first)
        assert len(fake.texts()) < len(ANSWER)  # killed mid-reply

        second = await serve_process(home, IRC_PASSWORD=PASSWORD)
        turn = f"turn:irc:{ALICE}:{msgid}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await fake.registered(2)
        fake.say("the long answer please", msgid=msgid)  # a bouncer's replay: seen
        fake.say("and now?")  # (each process's mock starts its script afresh)
        await eventually(
            lambda: collapsed(fake.texts()) == ANSWER * 2, what="two answers", timeout=BOUND
        )
        await stop(second)
        assert len(fake.texts()) <= 2 * len(ANSWER) + 1  # at most the line in flight twice
        assert fake.logins == ["habakkuk", "habakkuk"]  # SASL on each connection
        rows = jobs(home)
        assert rows[turn]["attempts"] == 1  # the turn ran once
        assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
        assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
