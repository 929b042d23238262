"""Exactly-once replies across a real SIGKILL of `habakkuk --serve` (a subprocess)."""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_telegram import BOT_TOKEN as TOKEN
from tests.channels.fake_telegram import FakeTelegram
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

# The processes are real and cold-started; their databases may be busy or not yet
# created when read (that counts as "not yet").
BOUND = 60.0
NOT_YET = (sqlite3.OperationalError,)

CHUNK = "\n\n".join(["alpha " * 500, "bravo " * 500, "charlie " * 500])


def config(tg: FakeTelegram, reply: str) -> str:
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
          tg:
            type: telegram
            token_env: TG_TOKEN
            base_url: {tg.base_url}
            allow_from: ["42"]
            poll_timeout: 1
        """
    )


def started_by(home: Path, delivery: str) -> dict[int, list[int]]:
    """The pids whose sends of each chunk of `delivery` started, by time (delivery_attempts)."""
    with contextlib.closing(sqlite3.connect(home / "control.db")) as conn:
        found: dict[int, list[int]] = {}
        for idx, owner in conn.execute(
            "SELECT idx, owner FROM delivery_attempts WHERE delivery = ? ORDER BY at",
            (delivery,),
        ):
            found.setdefault(int(idx), []).append(int(str(owner).split(":")[1]))
        return found


def transcript_roles(home: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(home / "transcripts.db")) as conn:
        return [r[0] for r in conn.execute("SELECT role FROM messages ORDER BY seq")]


@pytest.mark.timeout(180)
async def test_a_crash_mid_delivery_resumes_at_the_first_unsent_chunk(
    tg: FakeTelegram, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(tg, CHUNK))
    tg.hold_sends_after(1)  # chunk 1 goes out; chunk 2 hangs until the kill
    first = await serve_process(home, TG_TOKEN=TOKEN)
    update = tg.message("the long answer please")
    await tg.wait_for(lambda: len(tg.of("sendMessage", answered=None)) == 2, timeout=60)
    await kill(first)
    tg.release_sends()
    turn = f"turn:tg:42:{update['message']['message_id']}"
    delivered_before = tg.texts()
    assert len(delivered_before) == 1 and delivered_before[0].startswith("alpha")

    second = await serve_process(home, TG_TOKEN=TOKEN)
    await tg.wait_for(lambda: len(tg.texts()) == 3, timeout=60)
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await stop(second)
    texts = tg.texts()
    assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"]
    assert " ".join(texts).split() == CHUNK.split()
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1  # the turn ran once
    assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
    assert transcript_roles(home) == ["user", "assistant"]
    # Chunk 2's send started in the killed process and again after the restart: known to
    # be one that may have reached the chat (Telegram has no key to drop a resend by).
    assert started_by(home, f"reply:{turn}") == {
        0: [first.pid],
        1: [first.pid, second.pid],
        2: [second.pid],
    }


@pytest.mark.timeout(180)
async def test_a_chunk_telegram_took_before_the_kill_is_sent_again_and_known_as_such(
    tg: FakeTelegram, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(tg, CHUNK))
    tg.hold_sends_after(1, made=True)  # chunk 2 reaches the chat; its answer never the bot
    first = await serve_process(home, TG_TOKEN=TOKEN)
    update = tg.message("the long answer please")
    await tg.wait_for(lambda: len(tg.of("sendMessage", answered=None)) == 2, timeout=60)
    await kill(first)
    tg.release_sends()
    delivery = f"reply:turn:tg:42:{update['message']['message_id']}"

    second = await serve_process(home, TG_TOKEN=TOKEN)
    await eventually(
        lambda: jobs(home)[delivery]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await stop(second)
    # sendMessage takes no key and a bot cannot read the chat: chunk 2 comes twice, the
    # one double the design allows (the window between Telegram's answer and the record)
    assert [t.split()[0] for t in tg.in_chat()] == ["alpha", "bravo", "bravo", "charlie"]
    # and it is known for what it is: its send started in the killed process, then again
    # in the one that recorded it (what tests/crash/test_pg_nodes_kill9.py counts on)
    assert started_by(home, delivery)[1] == [first.pid, second.pid]


@pytest.mark.timeout(180)
async def test_a_crash_between_the_turns_end_and_its_delivery_sends_one_reply(
    tg: FakeTelegram, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(tg, "the one and only reply"))
    tg.hold_sends_after(0)  # the reply hangs: the turn is over, the delivery is not
    first = await serve_process(home, TG_TOKEN=TOKEN)
    update = tg.message("hello")
    turn = f"turn:tg:42:{update['message']['message_id']}"
    await eventually(
        lambda: jobs(home).get(turn, {"status": ""})["status"] == "done",
        what="the turn",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await tg.wait_for(lambda: len(tg.of("sendMessage", answered=None)) == 1, timeout=60)
    await kill(first)
    tg.release_sends()
    assert tg.texts() == []

    # The same update comes again (the kill may have beaten the offset save).
    tg.replay(update)
    second = await serve_process(home, TG_TOKEN=TOKEN)
    await tg.wait_for(lambda: len(tg.texts()) == 1, timeout=60)
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    await tg.wait_for(lambda: not tg.updates, timeout=60)  # the replay was read
    third = tg.message("after the restart")
    await tg.wait_for(lambda: len(tg.texts()) == 2, timeout=60)
    await stop(second)
    assert tg.texts() == ["the one and only reply", "the one and only reply"]
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1
    assert sorted(r for r in rows if rows[r]["kind"] == "turn") == sorted(
        [turn, f"turn:tg:42:{third['message']['message_id']}"]
    )
    assert transcript_roles(home) == ["user", "assistant", "user", "assistant"]


@pytest.mark.timeout(180)
async def test_a_sigterm_while_a_poll_is_in_flight_leaves_no_session_unclosed(
    tg: FakeTelegram, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # A long poll_timeout: the getUpdates call is held open by the fake when TERM lands.
    (home / "config.yaml").write_text(
        config(tg, "hi").replace("poll_timeout: 1", "poll_timeout: 30")
    )

    def polling_since(before: int) -> bool:
        """A getUpdates call after the first `before` is held open now."""
        return len(tg.of("getUpdates", answered=None)) > before and bool(
            tg.of("getUpdates", answered=False)
        )

    for _ in range(2):  # each shutdown, not only the first
        polls = len(tg.of("getUpdates", answered=None))
        process = await serve_process(home, TG_TOKEN=TOKEN)
        await tg.wait_for(functools.partial(polling_since, polls), timeout=60)
        said = await stop(process)
        assert "Unclosed" not in said, said
        assert said.rstrip().endswith("habakkuk: shutting down"), said
