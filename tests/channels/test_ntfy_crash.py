"""Exactly-once ntfy replies across a real SIGKILL of `habakkuk --serve` (a subprocess):
the delivery resumes at the first chunk not sent, and a message the stream replays
`since` an older id (a crash before the id was kept) is dropped as seen."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_ntfy import FakeNtfy
from tests.channels.ntfy_driver import INBOX, REPLIES
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError,)
# Three paragraphs of about 900 characters: three chunks under the adapter's 1000.
CHUNK = "\n\n".join(["alpha " * 150, "bravo " * 150, "charlie " * 110])


def config(fake: FakeNtfy) -> str:
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
          ntfy:
            type: ntfy
            base_url: {fake.base_url}
            topic: {REPLIES}
            listen: {INBOX}
            allow_from: ["*"]
        """
    )


@pytest.mark.timeout(180)
async def test_a_kill_mid_reply_resumes_and_a_replayed_message_runs_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    async with FakeNtfy() as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config(fake))
        old = fake.store(INBOX, "before the bot was there")  # the first start skips it
        fake.hold_publishes_after(1)  # chunk 1 goes; chunk 2 hangs until the kill
        first = await serve_process(home)
        await fake.wait_for(lambda: fake.streams == 1, timeout=BOUND)
        asked = fake.store(INBOX, "the long answer please")
        await fake.wait_for(lambda: fake.publishes == 2, timeout=BOUND)
        state = home / "channels" / "ntfy-ntfy.json"
        assert json.loads(state.read_text()) == {"last_id": asked.id}
        await kill(first)
        fake.release()
        assert [m.message.split()[0] for m in fake.of(REPLIES)] == ["alpha"]
        # As if the kill came between the gateway taking the message and the id kept.
        state.write_text(json.dumps({"last_id": old.id}))

        second = await serve_process(home)
        turn = f"turn:ntfy:{REPLIES}:{asked.id}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        assert fake.subscriptions == ["", old.id]  # it read again since the kept id
        fake.store(INBOX, "and now?")  # (each process's mock starts its script afresh)
        await fake.wait_for(lambda: len(fake.of(REPLIES)) == 6, timeout=BOUND)
        await stop(second)
        texts = [m.message for m in fake.of(REPLIES)]
        assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"] * 2
        assert " ".join(texts[:3]).split() == CHUNK.split()
        rows = jobs(home)
        assert rows[turn]["attempts"] == 1  # the turn ran once, the replay was seen
        assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
        assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
