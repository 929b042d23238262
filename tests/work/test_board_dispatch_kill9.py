"""The board with real processes: `--serve` killed with SIGKILL between a claim and its
enqueue (that state written in control.db, then the process started) and in the middle
of a card's turn, then restarted; and two `--serve` on one home. Afterwards every card
is in a state that names why, and no card is doing without a live job."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.store import SqliteDatabase
from habakkuk.services.board import build_board
from habakkuk.work.board_store import BoardStore
from habakkuk.work.board_types import CARD_KIND, NewCard, attempt_session, card_job_id
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, kill, query, stop, until_serving

CONFIG = """
providers:
  remote:
    type: openai
    base_url: {url}/v1
    key_env: REMOTE_KEY
agents:
  main:
    model: remote/gpt-fake
    mode: full
  other:
    model: remote/gpt-fake
    mode: full
board:
  dispatch_seconds: 0.5
"""


async def add_card(home: Path, title: str, *, claim: bool = False) -> str:
    """A card for `other`, written as `habakkuk board add` would; `claim`: also claimed by
    a dispatcher that died before it enqueued the job."""
    root = Home(home)
    root.prepare()
    config = parse_config(root.config_path.read_text(), root.config_path, root)
    db = await SqliteDatabase.open(root.db_path("control"), JOB_MIGRATIONS)
    try:
        board = build_board(JobQueue(db), config, EventBus(), root)
        card = await board.create(NewCard(title, assignee="other"))
        if claim:
            assert await BoardStore(db).claim(card.id, 0) is not None
        return card.id
    finally:
        await db.close()


def card_row(home: Path, card: str) -> sqlite3.Row:
    [row] = query(home / "control.db", "SELECT * FROM board_cards WHERE id = ?", (card,))
    return row


def assert_every_card_names_its_state(home: Path) -> None:
    control = home / "control.db"
    for card in query(control, "SELECT * FROM board_cards"):
        if card["status"] == "blocked":
            assert card["blocked_kind"] and card["blocked_reason"], dict(card)
        if card["status"] == "doing":
            jobs = query(
                control,
                "SELECT status FROM jobs WHERE id = ?",
                (card_job_id(card["id"], card["attempt"]),),
            )
            assert jobs and jobs[0]["status"] in ("queued", "running"), dict(card)


@pytest.mark.timeout(240)
async def test_sigkill_after_a_claim_and_mid_turn_then_serve_resumes_the_same_session(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with FakeModelServer() as srv:
        (home / "config.yaml").write_text(CONFIG.format(url=srv.base_url))
        card = await add_card(home, "Slow", claim=True)
        assert card_row(home, card)["status"] == "doing"
        assert not query(home / "control.db", "SELECT id FROM jobs WHERE kind = ?", (CARD_KIND,))
        srv.script(
            Reply(tool_calls=[ToolCall("exec", {"command": "sleep 60"})]),
            Reply(text="finished the slow work"),
        )
        session = attempt_session(card, 1)
        transcripts = home / "transcripts.db"
        tool_use = "SELECT seq FROM messages WHERE session_id = ? AND role = 'assistant'"

        first = await serve_process(home, REMOTE_KEY="k")
        # Repaired (the job enqueued under its id), started, and inside its exec.
        await eventually(
            lambda: query(transcripts, tool_use, (session,)),
            what="the card's turn to call exec",
            timeout=BOUND,
        )
        await kill(first)
        assert len(srv.requests) == 1

        second = await serve_process(home, REMOTE_KEY="k")
        await eventually(
            lambda: card_row(home, card)["status"] != "doing",
            what="the resumed card to settle",
            timeout=BOUND,
        )
        await stop(second)

    row = card_row(home, card)
    assert row["attempt"] == 1 and row["session"] == session
    # No board tool in this test's agent: the turn ended without completing, so the card
    # is blocked "failed" with the last reply, never done.
    assert row["status"] == "blocked" and row["blocked_kind"] == "failed"
    assert len(srv.requests) == 2
    jobs = query(home / "control.db", "SELECT id, status FROM jobs WHERE kind = ?", (CARD_KIND,))
    assert [(j["id"], j["status"]) for j in jobs] == [(card_job_id(card, 1), "done")]
    messages = query(
        transcripts, "SELECT role FROM messages WHERE session_id = ? ORDER BY seq", (session,)
    )
    # The card, the exec call, its interrupted result, the reply: one transcript.
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    comments = query(
        home / "control.db",
        "SELECT text FROM board_log WHERE card = ? AND kind = 'comment'",
        (card,),
    )
    assert [c["text"] for c in comments] == ["finished the slow work"]
    assert_every_card_names_its_state(home)


@pytest.mark.timeout(240)
async def test_two_serves_on_one_home_run_each_attempt_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with FakeModelServer() as srv:
        (home / "config.yaml").write_text(CONFIG.format(url=srv.base_url))
        cards = [await add_card(home, f"Card {i}") for i in range(3)]
        srv.script(*[Reply(text=f"reply {i}") for i in range(3)])
        pair = [await serve_process(home, REMOTE_KEY="k") for _ in range(2)]
        for process in pair:
            await until_serving(process)  # both at work before the cards can all be done
        await eventually(
            lambda: all(card_row(home, c)["status"] == "blocked" for c in cards),
            what="every card's attempt to end",
            timeout=BOUND,
        )
        for process in pair:
            await stop(process)
    assert len(srv.requests) == 3  # one model call per attempt, whichever process ran it
    jobs = query(home / "control.db", "SELECT id FROM jobs WHERE kind = ?", (CARD_KIND,))
    assert sorted(j["id"] for j in jobs) == sorted(card_job_id(c, 1) for c in cards)
    for card in cards:
        claims = query(
            home / "control.db",
            "SELECT id FROM board_log WHERE card = ? AND kind = 'claimed'",
            (card,),
        )
        assert len(claims) == 1 and card_row(home, card)["attempt"] == 1
    assert_every_card_names_its_state(home)
