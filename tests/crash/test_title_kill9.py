"""Crash safety of background titles with real processes: `habakkuk run` answers a first
turn and leaves its title job queued (it runs no maintenance); a serve killed with
SIGKILL in the middle of the title call leaves it to the next serve, which titles the
session once."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, kill, query, stop

CONFIG = """
providers:
  remote:
    type: openai
    base_url: {url}/v1
    key_env: REMOTE_KEY
agents:
  main:
    model: remote/gpt-fake
"""
FIRST = "Plan three days in Lisbon for me"


async def run_once(home: Path, text: str) -> str:
    """`habakkuk run TEXT` to its end; its stdout."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "habakkuk.cli", "run", text,
        env={**os.environ, "HABAKKUK_HOME": str(home), "REMOTE_KEY": "k"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), BOUND)
    assert process.returncode == 0, err.decode(errors="replace")
    return out.decode()


@pytest.mark.timeout(240)
async def test_sigkill_mid_title_call_then_serve_titles_the_session_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    control, transcripts = home / "control.db", home / "transcripts.db"
    jobs = "SELECT id, status, attempts FROM jobs WHERE kind = 'session_title'"
    async with FakeModelServer() as srv:
        (home / "config.yaml").write_text(CONFIG.format(url=srv.base_url))
        srv.script(Reply("Day one: Alfama."), Reply("Lost Title"), Reply("Three Days in Lisbon"))

        assert "Alfama" in await run_once(home, FIRST)
        [queued] = query(control, jobs)
        assert queued["status"] == "queued"  # in the reply's transaction, left for serve

        held = srv.gates["chat"] = asyncio.Event()
        first = await serve_process(home, REMOTE_KEY="k")
        await eventually(lambda: len(srv.requests) == 2, what="the title call", timeout=BOUND)
        await kill(first)  # mid-call: the job is leased, nothing is written
        held.set()  # the dead process's call takes its answer, which nobody reads
        await eventually(lambda: srv.pending() == 1, what="the lost answer", timeout=BOUND)
        del srv.gates["chat"]
        [session] = query(transcripts, "SELECT title, title_source FROM sessions")
        assert (session["title"], session["title_source"]) == (FIRST, "first_message")

        second = await serve_process(home, REMOTE_KEY="k")
        await eventually(
            lambda: [r for r in query(control, jobs) if r["status"] == "done"],
            what="the title job done by the second serve",
            timeout=BOUND,
        )
        await stop(second)

    [session] = query(transcripts, "SELECT title, title_source FROM sessions")
    assert (session["title"], session["title_source"]) == ("Three Days in Lisbon", "generated")
    assert len(srv.requests) == 3  # the turn once, the title call twice (one lost)
    assert len(query(transcripts, "SELECT seq FROM messages")) == 2  # the turn ran once
