"""Exactly-once Signal replies across a real SIGKILL of `habakkuk --serve` (a subprocess)."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_signal import ALICE_NUMBER, ALICE_UUID, BOT_NUMBER, FakeSignal
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError,)
# Three paragraphs of 1800 characters: three chunks under Signal's 2000.
CHUNK = "\n\n".join(["alpha " * 300, "bravo " * 300, "charlie " * 225])


def config(signal: FakeSignal) -> str:
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
          sig:
            type: signal
            base_url: {signal.base_url}
            account: "{BOT_NUMBER}"
            allow_from: ["{ALICE_NUMBER}"]
        """
    )


@pytest.mark.timeout(180)
async def test_a_kill_mid_reply_resumes_at_the_first_unsent_chunk_and_a_replay_is_dropped(
    signal_cli: FakeSignal, tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(config(signal_cli))
    signal_cli.hold_sends_after(1)  # chunk 1 goes out; chunk 2 hangs until the kill
    first = await serve_process(home)
    await signal_cli.wait_for(lambda: bool(signal_cli.streams), timeout=60)
    envelope = signal_cli.message("the long answer please")
    await signal_cli.wait_for(lambda: len(signal_cli.of("send", answered=None)) == 2, timeout=60)
    await kill(first)
    signal_cli.release_sends()
    turn = f"turn:sig:{ALICE_UUID}:{envelope['timestamp']}@{ALICE_UUID}"
    assert [t.split()[0] for t in signal_cli.texts()] == ["alpha"]

    second = await serve_process(home)
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 3, timeout=60)
    await eventually(
        lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
        what="the delivery",
        timeout=BOUND,
        ignore=NOT_YET,
    )
    # The daemon pushes the envelope again (as after a crash of its own): dropped as seen.
    signal_cli.push(envelope)
    signal_cli.message("and now?")  # (each process's mock starts its script afresh)
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 6, timeout=60)
    await stop(second)
    texts = signal_cli.texts()
    assert [t.split()[0] for t in texts] == ["alpha", "bravo", "charlie"] * 2
    assert " ".join(texts[:3]).split() == CHUNK.split()
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1  # the turn ran once
    assert rows[f"reply:{turn}"]["attempts"] == 2  # the delivery resumed once
    assert len([r for r in rows.values() if r["kind"] == "turn"]) == 2
    first_chunk = signal_cli.messages()[0]
    assert first_chunk.quote == (envelope["timestamp"], ALICE_UUID)  # only the first quotes
    assert all(m.quote is None for m in signal_cli.messages()[1:3])
