"""Crash safety of the memory review with real processes: SIGKILL between its stored plan
and its last change; the next `--serve` finishes it with no new model call and no
change made twice."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
from pathlib import Path

import pytest

from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import Message
from habakkuk.engine.sessions import TranscriptStore
from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, kill, query, stop

CHANGES = 20

CONFIG = """
providers:
  remote:
    type: openai
    base_url: {url}/v1
    key_env: REMOTE_KEY
agents:
  main:
    model: remote/gpt-fake
memory:
  review: true
  review_idle: 1s
  nightly: "off"
"""


async def seed(home: Path) -> str:
    root = Home(home)
    root.prepare()
    store = await TranscriptStore.open(root.db_path("transcripts"), root.db_path("control"))
    await store.create_session("s1", "main", "PROMPT")
    await store.append("s1", Message.user_text("I have many things to remember"), turn_id="t")
    await store.close()
    # The session went quiet two minutes ago (raw SQL: the store always stamps "now").
    with contextlib.closing(sqlite3.connect(root.db_path("transcripts"))) as conn:
        conn.execute("UPDATE sessions SET updated_at = updated_at - 120")
        conn.commit()
    return "s1"


@pytest.mark.timeout(240)
async def test_sigkill_mid_review_then_serve_finishes_it_without_calling_the_model(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with FakeModelServer() as srv:
        (home / "config.yaml").write_text(CONFIG.format(url=srv.base_url))
        session = await seed(home)
        changes = [
            {
                "op": "save",
                "title": f"Fact {i}",
                "content": f"fact number {i} " * 40,
                "from": "user",
            }
            for i in range(CHANGES)
        ]
        srv.script(Reply(text=json.dumps({"changes": changes})))
        memory_db = home / "agents" / "main" / "memory.db"
        runs = "SELECT * FROM review_runs"

        first = await serve_process(home, REMOTE_KEY="k")
        await eventually(lambda: query(memory_db, runs), what="the plan", timeout=BOUND)
        first.send_signal(signal.SIGSTOP)  # frozen right after its plan was stored
        [run] = query(memory_db, runs)
        assert run["done"] == 0 and run["applied"] < CHANGES
        await kill(first)
        assert len(srv.requests) == 1

        second = await serve_process(home, REMOTE_KEY="k")
        await eventually(
            lambda: [r for r in query(memory_db, runs) if r["done"] == 1],
            what="the resumed review to finish",
            timeout=BOUND,
        )
        await stop(second)

    assert len(srv.requests) == 1  # the plan was reused: no second model call
    [run] = query(memory_db, runs)
    assert run["applied"] == CHANGES
    notes = sorted(p.name for p in (home / "agents" / "main" / "memory").glob("*.md"))
    assert len(notes) == CHANGES
    history = query(
        home / "agents" / "main" / "history.db",
        "SELECT name, count(*) AS n FROM changes GROUP BY name",
    )
    assert {r["n"] for r in history} == {1} and len(history) == CHANGES
    log = (home / "agents" / "main" / "memory" / ".review.log").read_text().splitlines()
    assert len([line for line in log if f"memrev_{session}_1" in line]) == 1
    [position] = query(memory_db, "SELECT position FROM reviews")
    assert position[0] == 1
