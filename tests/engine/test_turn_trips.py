"""A turn's trips to the database threads: how many, and the ones merged into one
transaction (the session found and the turn queued; the state read in the opening
transaction; the final reply appended and the job completed)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.errors import LeaseLost, NotFound
from habakkuk.engine.events import JobFinished
from habakkuk.engine.jobs import MIGRATIONS, JobQueue, Owner, complete_in
from habakkuk.engine.llm.types import ContextBlock, Message, TextBlock
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.store import SqliteDatabase
from habakkuk.engine.timeouts import wait_within
from tests.conftest import mock_config
from tests.helpers import eventually

MAX_TRIPS = 5  # issue 18: a turn without tool calls, from submit to its end


@dataclass
class Trip:
    database: str
    function: str  # the qualified name of what ran on the database thread
    module: str
    result: Any = None


def record_trips(monkeypatch: pytest.MonkeyPatch, trips: list[Trip]) -> None:
    """Record every call that crosses to a database thread (SqliteDatabase.run / run_sync; a
    `write` is one `run`, recorded under the function it wraps)."""
    inner: contextvars.ContextVar[Callable[..., Any] | None] = contextvars.ContextVar(
        "inner", default=None
    )
    run, run_sync, write = SqliteDatabase.run, SqliteDatabase.run_sync, SqliteDatabase.write
    write_now, write_if_free = SqliteDatabase.write_now, SqliteDatabase.write_if_free

    def noted(
        db: SqliteDatabase, fn: Callable[[sqlite3.Connection], Any], into: list[Trip] | None = None
    ) -> Callable[..., Any]:
        named = inner.get() or fn
        trip = Trip(Path(db.path).name, named.__qualname__, named.__module__)
        (trips if into is None else into).append(trip)

        def call(conn: sqlite3.Connection) -> Any:
            trip.result = fn(conn)
            return trip.result

        return call

    async def counted_run(db: SqliteDatabase, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        return await run(db, noted(db, fn))

    def counted_run_sync(db: SqliteDatabase, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        return run_sync(db, noted(db, fn))

    async def counted_write(
        db: SqliteDatabase,
        fn: Callable[[sqlite3.Connection], Any],
        *,
        inline: bool = False,
        shared: bool = False,
        one_statement: bool = False,
        keys: Sequence[str] = (),
    ) -> Any:
        # A write is a trip of its own (a transaction, on the database thread or inline
        # on the loop's), named by the function it runs.
        return await write(db, noted(db, fn), inline=inline, one_statement=one_statement)

    def counted_write_now(
        db: SqliteDatabase,
        fn: Callable[[sqlite3.Connection], Any],
        *,
        inline: bool = False,
        shared: bool = False,
        keys: Sequence[str] = (),
    ) -> Any:
        return write_now(db, noted(db, fn), inline=inline)

    monkeypatch.setattr(SqliteDatabase, "run", counted_run)
    monkeypatch.setattr(SqliteDatabase, "run_sync", counted_run_sync)
    monkeypatch.setattr(SqliteDatabase, "write", counted_write)

    def counted_write_if_free(
        db: SqliteDatabase,
        fn: Callable[[sqlite3.Connection], Any],
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        once: object = None,
        one_statement: bool = False,
    ) -> Any:
        # Counted only when it ran: else the caller writes it another way, counted then.
        ran: list[Trip] = []
        outcome = write_if_free(
            db, noted(db, fn, ran), loop, once=once, one_statement=one_statement
        )
        if outcome is not None:
            trips.extend(ran)
        return outcome

    monkeypatch.setattr(SqliteDatabase, "write_now", counted_write_now)
    monkeypatch.setattr(SqliteDatabase, "write_if_free", counted_write_if_free)


def the_turns_own(trips: list[Trip]) -> list[Trip]:
    """Without what runs beside a turn: a pool's claim that found nothing, the work loops'
    sweeps (sub-agents, board) that start with the workers."""
    return [
        t
        for t in trips
        if not ("JobQueue.settle_and_claim" in t.function and t.result == ([], []))
        and not t.module.startswith("habakkuk.work.")
    ]


async def test_a_turn_without_tool_calls_takes_at_most_five_database_trips(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = await runtime_factory(mock_config('- "hello"', mode="read-only"))
    session = await runtime.sessions.new_session()
    other = await runtime.sessions.new_session()
    runtime.start_workers()
    with runtime.bus.subscribe(lambda e: isinstance(e, JobFinished), maxsize=8) as finished:
        warm = await runtime.turns.submit(session.id, "warm up")
        await wait_within(finished.get(), 30)

        async def warm_up_settled() -> bool:
            # job.finished may come before the pool's trip that settles the job (and looks
            # for the next) returns: a claim in that trip would escape the count.
            job = await runtime.queue.get(warm)
            return job is not None and job.status == "done"

        await eventually(warm_up_settled, what="the warm-up turn settled")
        trips: list[Trip] = []
        record_trips(monkeypatch, trips)
        turn = await runtime.turns.submit(other.id, "hi")
        second = await wait_within(finished.get(), 30)
        monkeypatch.undo()
    assert isinstance(second, JobFinished) and second.job == turn and second.status == "done"
    own = the_turns_own(trips)
    path = "\n".join(f"{t.database} {t.function}" for t in own)
    assert len(own) <= MAX_TRIPS, f"{len(own)} trips for one turn:\n{path}"
    # The count sees the turn's own trips (a count of none would pass for any number).
    assert {"control.db", "transcripts.db"} <= {t.database for t in own}, path
    assert any("claim" in t.function for t in own), path
    # What the merges keep: the user's message and the reply, the job done with its reply.
    stored = await runtime.sessions.messages(other.id)
    assert [m.role for m in stored] == ["user", "assistant"]
    job = await runtime.queue.get(turn)
    assert job.status == "done" and job.result == {"session": other.id, "reply": "hello"}


async def test_the_turn_pool_leaves_a_job_its_turn_completed_as_it_is(
    runtime_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await runtime_factory(mock_config('- "done once"', mode="read-only"))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    caplog.set_level(logging.WARNING)
    outcome = await wait_within(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hi")), 30
    )
    assert outcome.status == "done" and outcome.reply == "done once"
    job = await runtime.queue.get(outcome.turn)
    assert job.attempts == 1 and job.lease_owner is None
    assert not [r for r in caplog.records if "lease lost" in r.getMessage()]


async def test_a_reply_committed_before_a_crash_ends_the_turn_without_a_model_call(
    runtime_factory: Any,
) -> None:
    """transcripts.db commits before control.db: a crash between them leaves the reply
    with its job still to do, never the job done without its reply. The resumed turn
    finds the reply and finishes on it."""
    runtime = await runtime_factory(mock_config('- "a second answer"', mode="read-only"))
    session = await runtime.sessions.new_session()
    await runtime.transcripts.append(session.id, Message.user_text("go"), turn_id="turn_x")
    await runtime.transcripts.append(
        session.id, Message("assistant", [TextBlock("the first answer")]), turn_id="turn_x"
    )
    await runtime.queue.enqueue(
        "turn_x", "turn", {"session": session.id, "text": "go"}, serial_key=session.id
    )
    runtime.start_workers()
    outcome = await wait_within(runtime.turns.wait_turn("turn_x"), 30)
    assert outcome.status == "done" and outcome.reply == "the first answer"
    assert [m.role for m in await runtime.sessions.messages(session.id)] == ["user", "assistant"]
    assert await runtime.ledger.usage_totals() == []  # no model call


async def test_submitting_to_a_missing_session_queues_nothing(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config('- "hello"'))
    with pytest.raises(NotFound, match="ses_missing"):
        await runtime.turns.submit("ses_missing", "hi", turn_id="turn_nowhere")
    with pytest.raises(NotFound, match="ses_missing"):
        await runtime.turns.compact_session("ses_missing", job_id="compact_nowhere")
    assert await runtime.queue.get("turn_nowhere") is None
    assert await runtime.queue.get("compact_nowhere") is None


async def test_a_submitted_turn_wakes_an_idle_pool_once_and_only_when_new(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config('- "hello"'))
    session = await runtime.sessions.new_session()
    woken: list[str] = []
    runtime.queue.add_listener(woken.append)
    await runtime.turns.submit(session.id, "hi", turn_id="turn_once")
    await runtime.turns.submit(session.id, "hi", turn_id="turn_once")
    assert woken == ["turn"]
    job = await runtime.queue.get("turn_once")
    assert job.serial_key == session.id and job.payload["session"] == session.id
    assert job.payload["text"] == "hi" and job.max_attempts == 3


@pytest.fixture
async def stores(tmp_path: Path) -> Any:
    control = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    transcripts = await TranscriptStore.open(tmp_path / "transcripts.db", tmp_path / "control.db")
    queue = JobQueue(control)
    yield queue, transcripts
    await transcripts.close()
    await control.close()


async def test_the_final_reply_and_its_job_done_commit_in_one_transaction(stores: Any) -> None:
    queue, transcripts = stores
    session = await transcripts.create_session("ses_1", "main", "")
    await queue.enqueue("turn_1", "turn", {"session": session.id}, serial_key=session.id)
    lease = await queue.claim(["turn"])
    assert lease is not None
    seq = await transcripts.append(
        session.id,
        Message("assistant", [TextBlock("the reply")]),
        turn_id="turn_1",
        guard=lambda conn: lease.check(conn, "control"),
        then=lambda conn: complete_in(conn, lease, {"reply": "the reply"}),
    )
    assert seq == 0
    job = await queue.get("turn_1")
    assert job.status == "done" and job.result == {"reply": "the reply"}
    assert job.lease_owner is None


async def test_a_lost_lease_writes_neither_the_reply_nor_the_job_done(stores: Any) -> None:
    queue, transcripts = stores
    session = await transcripts.create_session("ses_1", "main", "")
    await queue.enqueue("turn_1", "turn", {"session": session.id}, serial_key=session.id)
    lease = await queue.claim(["turn"])
    assert lease is not None
    # Another worker took the job over (our lease ran out).
    await queue.db.write(lambda conn: conn.execute("UPDATE jobs SET lease_until = 0"))
    other = JobQueue(queue.db, owner=Owner("elsewhere", 1, "t"))
    assert await other.claim(["turn"]) is not None
    with pytest.raises(LeaseLost):
        await transcripts.append(
            session.id,
            Message("assistant", [TextBlock("the reply")]),
            turn_id="turn_1",
            then=lambda conn: complete_in(conn, lease, {"reply": "the reply"}),
        )
    assert await transcripts.messages(session.id) == []
    job = await queue.get("turn_1")
    assert job.status == "running" and job.lease_owner == "elsewhere:1:t"


@pytest.mark.parametrize("attached", [True, False], ids=["state-attached", "state-apart"])
async def test_the_sessions_state_reaches_its_turn_read_in_or_beside_the_opening(
    runtime_factory: Any, attached: bool
) -> None:
    """The runtime attaches state.db to transcripts.db's connection (the state read in the
    opening transaction); a store without it reads state.db in a trip of its own."""
    runtime = await runtime_factory(mock_config('- "noted"', mode="read-only"))
    if not attached:
        runtime.transcripts.state_schema = None
    session = await runtime.sessions.new_session()
    await runtime.state.add_todos(session.id, ["write the tests"])
    runtime.start_workers()
    outcome = await wait_within(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hi")), 30
    )
    assert outcome.status == "done"
    first = (await runtime.sessions.messages(session.id))[0].message
    [note] = [b for b in first.blocks if isinstance(b, ContextBlock) and b.kind == "todo"]
    assert "write the tests" in note.text
