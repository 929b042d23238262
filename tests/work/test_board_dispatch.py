"""The board's dispatcher and card runs in one process: a real control.db, the real
runtime's pools, the scripted mock model. The dispatcher's looks are driven by hand
(`look()`), except where the test is about what wakes it.

The board's own tools belong to another module; here the assignee finishes its card
through `finish_card`, a test tool that calls the board's `complete` as the agent, the
way board_complete does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from typing import Any

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput
from habakkuk.work.board_dispatch import Dispatcher, delivery_id
from habakkuk.work.board_store import BoardStore
from habakkuk.work.board_types import (
    CARD_KIND,
    DISPATCHER_LEASE,
    WAKE_FILE,
    Card,
    NewCard,
    attempt_session,
    card_job_id,
    notice_id,
)
from tests.helpers import eventually

SCRIPT = """
- match: 'Title: Slow'
  steps:
    - tool_calls: [{name: exec, arguments: {command: "sleep 60"}}]
    - text: "never"
- match: 'Title: Broken'
  steps: [{error: server}]
- match: 'attempt 1\\)[\\s\\S]*Title: Flaky'
  steps: [{text: "I had a look but did not finish."}]
- match: 'Title: (\\w+)'
  steps:
    - tool_calls: [{name: finish_card, arguments: {result: "result of the card"}}]
    - text: "finished"
- steps: [{text: "noted"}]
"""


def config(interval: float = 600.0) -> str:
    script = "\n".join("      " + line for line in SCRIPT.strip().splitlines())
    return (
        "providers:\n  mock:\n    type: mock\n    script:\n" + script + "\n"
        "agents:\n  main:\n    model: mock/scripted\n    mode: full\n"
        "  other:\n    model: mock/scripted\n    mode: full\n"
        f"board:\n  dispatch_seconds: {interval}\n"
    )


class FinishCard(Tool):
    """Completes the card whose attempt this turn is, as its assignee (test tool)."""

    name = "finish_card"
    description = "complete the card this session works on"
    input_schema = {
        "type": "object",
        "properties": {"result": {"type": "string"}},
        "required": ["result"],
    }
    risk = Risk.READ

    def __init__(self, board: Any):
        self.board = board

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        card_id = ctx.session.removeprefix("ses_").rpartition("_a")[0]
        card = await self.board.get(card_id)
        done = await self.board.complete(
            card_id, f"{args['result']}: {card.title}", by=ctx.agent, session=ctx.session
        )
        return ToolOutput(f"card {done.id} is {done.status}")


async def started(runtime_factory: Any, interval: float = 600.0, **workers: Any) -> Any:
    runtime = await runtime_factory(config(interval))
    runtime.tools.register(FinishCard(runtime.board), "core")
    runtime.start_workers(**workers)
    return runtime


def dispatcher_of(runtime: Any) -> Dispatcher:
    return Dispatcher(
        BoardStore(runtime.queue.db),
        runtime.queue,
        runtime.turns,
        lambda: runtime.outbox,
        runtime.home.root,
        language_of=runtime.config.language_of,  # as the runtime's wiring does
        interval=600.0,
    )


async def run_attempt(runtime: Any, card: Card, attempt: int) -> Card:
    """Wait for the attempt's job to finish; the card read back."""
    outcome = await runtime.turns.wait_turn(card_job_id(card.id, attempt))
    assert outcome.status == "done", outcome
    read: Card = await runtime.board.get(card.id)
    return read


async def first_text(runtime: Any, session: str) -> str:
    stored = await runtime.sessions.messages(session)
    return str(stored[0].message.text)


async def test_a_ready_card_runs_as_its_assignees_turn_and_its_result_goes_back_once(
    runtime_factory: Any,
) -> None:
    runtime = await started(runtime_factory)
    asker = await runtime.sessions.new_session("main")
    reply_to = ReplyTo("web:w1", "m1", "web")
    card = await runtime.board.create(
        NewCard(
            "Report",
            body="write the report",
            assignee="other",
            creator_session=asker.id,
            reply_to=reply_to,
        ),
        by="main",
    )
    dispatcher = dispatcher_of(runtime)
    report = await dispatcher.look()
    assert report.dispatched == 1
    job = await runtime.queue.get(card_job_id(card.id, 1))
    assert job is not None and job.kind == CARD_KIND
    assert job.payload["session"] == attempt_session(card.id, 1)
    done = await run_attempt(runtime, card, 1)
    assert done.status == "done" and done.result == "result of the card: Report"
    session = await runtime.sessions.session(attempt_session(card.id, 1))
    assert session.agent == "other" and session.origin == "board"
    assert "write the report" in await first_text(runtime, session.id)

    await dispatcher.look()
    notice = notice_id(card.id, done.revision)
    turn = await runtime.queue.get(notice)
    assert turn is not None and turn.payload["session"] == asker.id
    assert turn.payload["reply_to"] == {"to": "web:w1", "message": "m1", "sender": "web"}
    assert "result of the card: Report" in turn.payload["text"]
    assert (await runtime.turns.wait_turn(notice)).reply == "noted"
    again = await dispatcher.look()
    assert again.notified == 0 and again.dispatched == 0
    read = await runtime.board.get(card.id)
    assert [e.kind for e in read.events].count("notified") == 1
    notices = await runtime.queue.db.fetchall(
        "SELECT id FROM jobs WHERE id LIKE ?", (f"turn_{card.id}%",)
    )
    assert [r["id"] for r in notices] == [notice]


async def test_a_card_waits_on_its_dependency_until_it_is_done_then_sees_its_result(
    runtime_factory: Any,
) -> None:
    runtime = await started(runtime_factory)
    first = await runtime.board.create(NewCard("Flaky", assignee="other"))
    second = await runtime.board.create(NewCard("Summary", assignee="main", depends_on=(first.id,)))
    assert (await runtime.board.get(second.id)).waiting_on == ((first.id, "todo"),)
    dispatcher = dispatcher_of(runtime)
    assert (await dispatcher.look()).dispatched == 1
    assert (await runtime.board.get(second.id)).waiting_on == ((first.id, "doing"),)

    # Its first attempt ends without completing: blocked "failed", never done.
    blocked = await run_attempt(runtime, first, 1)
    assert blocked.status == "blocked" and blocked.blocked_kind == "failed"
    assert "without board_complete" in blocked.blocked_reason
    assert blocked.comments[-1].text == "I had a look but did not finish."
    assert (await runtime.board.get(second.id)).waiting_on == ((first.id, "blocked"),)
    assert (await dispatcher.look()).dispatched == 0
    assert (await runtime.board.get(second.id)).status == "todo"

    await runtime.board.reopen(first.id)
    assert (await dispatcher.look()).dispatched == 1
    done = await run_attempt(runtime, first, 2)
    assert done.status == "done" and done.attempt == 2
    assert (await dispatcher.look()).dispatched == 1
    finished = await run_attempt(runtime, second, 1)
    assert finished.status == "done"
    text = await first_text(runtime, attempt_session(second.id, 1))
    assert f"Result of {first.id}" in text and "result of the card: Flaky" in text


async def test_a_card_whose_turn_fails_is_blocked_with_the_error_never_done(
    runtime_factory: Any,
) -> None:
    runtime = await started(runtime_factory)
    card = await runtime.board.create(NewCard("Broken", assignee="other"))
    assert (await dispatcher_of(runtime).look()).dispatched == 1
    outcome = await runtime.turns.wait_turn(card_job_id(card.id, 1))
    assert outcome.status == "failed"
    read = await runtime.board.get(card.id)
    assert read.status == "blocked" and read.blocked_kind == "failed"
    assert "scripted server" in read.blocked_reason
    assert [e.kind for e in read.events][-1] == "failed"


async def test_a_card_cancelled_while_its_turn_runs_stops_it_and_stays_cancelled(
    runtime_factory: Any,
) -> None:
    runtime = await started(runtime_factory)
    card = await runtime.board.create(NewCard("Slow", assignee="other"))
    with runtime.bus.subscribe(lambda e: e.kind == "tool.start") as calling:
        assert (await dispatcher_of(runtime).look()).dispatched == 1
        await calling.get()
    cancelled = await runtime.board.cancel(card.id)
    assert cancelled.status == "cancelled"
    outcome = await runtime.turns.wait_turn(card_job_id(card.id, 1))
    assert outcome.status == "cancelled"
    read = await runtime.board.get(card.id)
    assert read.status == "cancelled" and read.result == ""
    assert "stopped" in [e.kind for e in read.events]


async def test_a_claimed_card_without_its_job_is_queued_again_under_the_same_id(
    runtime_factory: Any,
) -> None:
    runtime = await started(runtime_factory)
    card = await runtime.board.create(NewCard("Orphan", assignee="other"))
    store = BoardStore(runtime.queue.db)
    claimed = await store.claim(card.id, 0)  # a crash right after the claim
    assert claimed is not None and claimed.status == "doing"
    report = await dispatcher_of(runtime).look()
    assert report.repaired == 1 and report.dispatched == 0
    done = await run_attempt(runtime, card, 1)
    assert done.status == "done" and done.attempt == 1


async def test_a_doing_card_whose_job_ended_is_blocked_with_why(runtime_factory: Any) -> None:
    runtime = await runtime_factory(config())  # no workers: the job stays queued
    card = await runtime.board.create(NewCard("Stopped", assignee="other"))
    store = BoardStore(runtime.queue.db)
    assert await store.claim(card.id, 0) is not None
    job = card_job_id(card.id, 1)
    await runtime.queue.enqueue(job, CARD_KIND, {"card": card.id, "attempt": 1})
    assert await runtime.queue.cancel(job) == "cancelled"
    report = await dispatcher_of(runtime).look()
    assert report.settled == 1
    read = await runtime.board.get(card.id)
    assert read.status == "blocked" and read.blocked_kind == "failed"
    assert "stopped" in read.blocked_reason


async def test_a_question_from_a_card_without_a_creator_goes_to_deliver_to_once(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(config())  # no workers: the delivery stays queued
    card = await runtime.board.create(NewCard("Ask", assignee="other", deliver_to="telegram:42"))
    store = BoardStore(runtime.queue.db)
    assert await store.claim(card.id, 0) is not None
    asked = await store.settle_attempt(
        card.id, 1, status="blocked", kind="question", reason="Which region?", author="other"
    )
    assert asked is not None
    dispatcher = dispatcher_of(runtime)
    assert (await dispatcher.look()).notified == 1
    assert (await dispatcher.look()).notified == 0
    rows = await runtime.queue.db.fetchall(
        "SELECT id, payload FROM jobs WHERE id LIKE ?", (f"%{card.id}_r%",)
    )
    assert [r["id"] for r in rows] == [delivery_id(card.id, asked.revision)]
    assert "question" in rows[0]["payload"] and "Which region?" in rows[0]["payload"]
    assert "telegram" in rows[0]["payload"]


async def test_a_notice_to_deliver_to_speaks_the_chats_language_and_a_creators_turn_english(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(config() + "language: fr\n")  # no workers
    store = BoardStore(runtime.queue.db)
    asker = await runtime.sessions.new_session("main")
    for title, creator in (("Ask", ""), ("Told", asker.id)):
        card = await runtime.board.create(
            NewCard(title, assignee="other", deliver_to="telegram:42", creator_session=creator)
        )
        assert await store.claim(card.id, 0) is not None
        blocked = await store.settle_attempt(
            card.id, 1, status="blocked", kind="question", reason="Which region?", author="other"
        )
        assert blocked is not None
    assert (await dispatcher_of(runtime).look()).notified == 2
    [chat] = await runtime.queue.db.fetchall("SELECT payload FROM jobs WHERE id LIKE 'deliver_%'")
    assert "est bloquée sur une question pour vous" in json.loads(chat["payload"])["text"]
    [turn] = await runtime.queue.db.fetchall("SELECT payload FROM jobs WHERE kind = 'turn'")
    said = json.loads(turn["payload"])["text"]
    assert "is blocked on a question for you" in said  # the model reads English


async def test_a_second_dispatcher_does_nothing_while_the_first_holds_the_lease(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(config())
    await runtime.board.create(NewCard("Once", assignee="other"))
    first, second = dispatcher_of(runtime), dispatcher_of(runtime)
    second.owner = "another-process"
    assert (await first.look()).dispatched == 1
    assert (await second.look()).held_by == first.owner


async def test_the_boards_wake_dispatches_at_once(runtime_factory: Any) -> None:
    # dispatch_seconds is 600: only the in-process wake can start this card in time.
    runtime = await started(runtime_factory, maintenance=True)
    card = await runtime.board.create(NewCard("Woken", assignee="other"))

    async def done() -> bool:
        return bool((await runtime.board.get(card.id)).status == "done")

    await eventually(done, what="the woken card to be done")


async def test_a_change_to_the_wake_file_wakes_the_dispatcher(runtime_factory: Any) -> None:
    # This dispatcher is not registered with the board: only the file can wake it, as a
    # dispatcher in another process is woken by the CLI's touch.
    runtime = await started(runtime_factory)
    dispatcher = dispatcher_of(runtime)
    task = asyncio.create_task(dispatcher.run())
    try:

        async def holding() -> bool:
            rows = await runtime.queue.db.fetchall(
                "SELECT owner FROM leases WHERE name = ?", (DISPATCHER_LEASE,)
            )
            return bool(rows) and rows[0]["owner"] == dispatcher.owner

        await eventually(
            holding, what="the dispatcher's first look", ignore=(sqlite3.OperationalError,)
        )
        card = await runtime.board.create(NewCard("From the CLI", assignee="other"))
        assert (runtime.home.root / WAKE_FILE).exists()

        async def done() -> bool:
            return bool((await runtime.board.get(card.id)).status == "done")

        await eventually(done, what="the card the wake file announced to be done")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
