"""Exactly-once Zulip replies across a real SIGKILL of `habakkuk --serve` (a subprocess):
the delivery resumes at the first chunk not sent; the queue the server dropped meanwhile
is registered anew, and the messages fetched after the kept one (an older one, as if the
kill came before the newest was kept) are handed on, the one already taken dropped as
seen."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_zulip import ALICE_EMAIL, ALICE_ID, API_KEY, BOT_EMAIL, BOT_ID, FakeZulip
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError,)
# Three paragraphs of about 3,000 characters: three chunks under the adapter's 9,000.
CHUNK = "\n\n".join(["alpha " * 1400, "bravo " * 1400, "charlie " * 1000])


def config(fake: FakeZulip) -> str:
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
          zulip:
            type: zulip
            base_url: {fake.base_url}
            username: {BOT_EMAIL}
            token_env: ZULIP_TEST_KEY
            allow_from: ["{ALICE_EMAIL}"]
        """
    )


def replies(fake: FakeZulip) -> list[str]:
    return [m.content for m in fake.of(ALICE_ID) if m.sender_id == BOT_ID]


@pytest.mark.timeout(180)
async def test_a_kill_mid_reply_resumes_and_a_replayed_event_runs_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with FakeZulip(heartbeat=0.5) as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(fake))
        fake.hold_sends_after(1)  # chunk 1 goes; chunk 2 hangs until the kill
        first = await serve_process(home, ZULIP_TEST_KEY=API_KEY)
        await fake.wait_for(lambda: fake.registers == 1, timeout=BOUND)
        asked = fake.post(ALICE_ID, "the long answer please", to=[BOT_ID])
        await fake.wait_for(lambda: fake.sends == 2, timeout=BOUND)
        state = home / "channels" / "zulip-zulip.json"
        kept = json.loads(state.read_text())
        assert kept["queue_id"] == "queue-1" and kept["last_message_id"] >= asked.id
        await kill(first)
        fake.release()
        assert [text.split()[0] for text in replies(fake)] == ["alpha"]
        fake.drop_queues()  # the server restarted while we were down
        # As if the kill came between the gateway taking the message and it being kept.
        state.write_text(json.dumps(dict(kept, last_message_id=asked.id - 1)))

        second = await serve_process(home, ZULIP_TEST_KEY=API_KEY)
        turn = f"turn:zulip:{ALICE_EMAIL}:{asked.id}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        assert fake.registers == 2  # the lost queue was replaced
        assert fake.anchors == [str(asked.id - 1)]  # and what it held fetched
        fake.post(ALICE_ID, "and now?", to=[BOT_ID])  # (each process's mock starts afresh)
        await fake.wait_for(lambda: len(replies(fake)) == 6, timeout=BOUND)
        await stop(second)
        texts = replies(fake)
        assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"] * 2
        assert " ".join(texts[:3]).split() == CHUNK.split()
        rows = jobs(home)
        assert rows[turn]["attempts"] == 1  # the turn ran once, the replay was seen
        assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
        assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
