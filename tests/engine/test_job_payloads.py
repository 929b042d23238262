"""Every job kind's payload is a typed value; JSON only at the queue (engine/payloads.py).

The rows today's code wrote still parse (payload_rows.py), a payload that does not parse
fails its job for good with one line naming the job and the field (through a real pool
and queue), and the boundary stays typed: a producer cannot queue the wrong value, and
no module reads a stored payload by key.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.adapter import Address, Button
from habakkuk.channels.delivery_types import DELIVERIES, TextDelivery
from habakkuk.engine.agent.requests import (
    TURN,
    ReplyTo,
    SubturnOptions,
    TurnRequest,
    session_of,
    turn_request,
)
from habakkuk.engine.jobs import (
    MIGRATIONS,
    BadPayload,
    Job,
    JobQueue,
    NewJob,
    declared_kind,
    encode_payload,
    payload_of,
)
from habakkuk.engine.llm.types import ImageBlock
from habakkuk.engine.retention import RetentionSweep
from habakkuk.engine.store import SqliteDatabase
from habakkuk.knowledge.review_kinds import MemoryReview, NightlyReview
from habakkuk.work.board_types import CARD_RUNS, CardRun
from habakkuk.work.delegation_types import SUBTURNS, DelegateRun, SubturnSpec
from habakkuk.work.run_book import ScheduleSlot
from habakkuk.work.service import PROMPT_SLOTS
from tests.conftest import mock_config
from tests.engine.payload_rows import ROWS

ROOT = Path(__file__).resolve().parents[2] / "habakkuk"


@pytest.fixture
async def queue(tmp_path: Path) -> Any:
    made = JobQueue(await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS))
    yield made
    await made.db.close()


async def stored(queue: JobQueue, job_id: str, kind: str, row: str) -> Job:
    """`row` queued as it is (JSON as an older version stored it) and read back."""
    assert await queue.enqueue(job_id, kind, json.loads(row))
    job = await queue.get(job_id)
    assert job is not None
    return job


def read(job: Job) -> Any:
    kind = declared_kind(job.kind)
    assert kind is not None and kind.payload is not None, f"{job.kind} declares no payload"
    return payload_of(job, kind)


# -- the rows today's code wrote -------------------------------------------------------


@pytest.mark.parametrize(("kind", "row", "same"), ROWS)
async def test_every_row_the_code_before_wrote_still_parses_as_its_kinds_type(
    queue: JobQueue, kind: str, row: str, same: bool
) -> None:
    job = await stored(queue, "job_1", kind, row)
    value = read(job)
    # Written again it reads back as the same value ...
    again = await stored(queue, "job_2", kind, encode_payload(kind, value))
    assert read(again) == value
    # ... and, for a row in today's format, as the same JSON.
    if same:
        assert again.payload == json.loads(row)


async def test_the_old_rows_read_as_the_values_their_producers_meant(queue: JobQueue) -> None:
    values = [
        read(await stored(queue, f"r{n}", kind, row)) for n, (kind, row, _) in enumerate(ROWS)
    ]
    by_type: dict[type, list[Any]] = {}
    for value in values:
        by_type.setdefault(type(value), []).append(value)
    turns = by_type[TurnRequest]
    assert turns[0] == TurnRequest("ses_0a6a497c40188d37", "ask the helper")
    assert turns[1].reply_to == ReplyTo("web:w1", "4b6480179f4d7862", "web") and turns[1].attended
    assert turns[2].reply_to == ReplyTo("web:hook-github", "", "webhook:github")
    assert not turns[2].attended
    photo = turns[4]
    assert photo.blocks == (
        ImageBlock(
            "image/jpeg",
            blob="/home/u/.habakkuk/blobs/d0/d036c30c1ae00282fc10849ecd16de17dd59a8d6adb8f7aa309"
            "f8f36fd811022.jpg",
            name="501-0-photo.jpg",
        ),
    )
    assert turns[5] == TurnRequest(
        "ses_4f7862080a2568f7", compact=True, reply_to=ReplyTo("tg:42", "505", "42")
    )
    assert turns[6].reply_to == ReplyTo("web:w1")  # board_create kept only the address
    children = by_type[DelegateRun]
    assert children[0].spec == SubturnSpec(
        "count the files",
        "helper",
        "ses_0a6a497c40188d37",
        "turn_9ec15a8cf64e1c44",
        call_id="call_fake00000000000000000003",
    )
    assert children[0].turn.subturn == SubturnOptions() and children[0].worktree_of is None
    assert children[1].turn.subturn == SubturnOptions(("core", "memory"), "fake/gpt-fake-mini")
    schema = children[2].spec.output_schema
    assert children[2].turn.subturn == SubturnOptions(output_schema=schema) and schema
    worktree = children[3]
    assert worktree.worktree_of == "/home/u/ws" and worktree.spec.worktree
    assert worktree.turn.subturn is not None
    assert (
        worktree.turn.subturn.workspace == "/home/u/ws/.habakkuk-worktrees/sub_78647f9ec9b44275babb"
    )
    assert children[4].spec.reply_to == ReplyTo("web:w1", "4b6480179f4d7862", "web")
    assert by_type[CardRun] == [CardRun("card_3178016842", 1, "ses_card_3178016842_a1", "other")]
    assert by_type[ScheduleSlot][0] == ScheduleSlot("sch_e61a6a1f9cd3", 1780311600.0)
    assert by_type[ScheduleSlot][1].extra
    assert by_type[MemoryReview] == [MemoryReview("main", "ses_bee4489a5f2bc2b2", 1)]
    assert by_type[NightlyReview] == [NightlyReview("main")]
    assert by_type[RetentionSweep] == [RetentionSweep()]
    oldest = by_type[TextDelivery][-1]
    assert oldest == TextDelivery(Address("tg", "42"), "queued before the upgrade")
    approval = by_type[TextDelivery][-2]
    assert approval.buttons[1] == (Button("Allow for this session", "fy|d2d0d51c|2"),)


async def test_older_spellings_still_parse(queue: JobQueue) -> None:
    # The first slot jobs named their schedule "schedule_id"; a platform message id was
    # stored as the number the platform gave.
    slot = await stored(queue, "s", "schedule.prompt", '{"schedule_id":"sch_1","slot":5}')
    assert payload_of(slot, PROMPT_SLOTS) == ScheduleSlot("sch_1", 5.0)
    numeric = '{"reply_to":{"to":"tg:42","message":501},"text":"hi","session":"ses_1"}'
    turn = await stored(queue, "t", "turn", numeric)
    assert payload_of(turn, TURN).reply_to == ReplyTo("tg:42", "501")


async def test_a_payload_is_read_once_per_job(queue: JobQueue) -> None:
    job = await stored(queue, "t", "turn", '{"text":"hi","session":"ses_1"}')
    assert payload_of(job, TURN) is payload_of(job, TURN)
    assert session_of(job) == "ses_1" and turn_request(job) == TurnRequest("ses_1", "hi")


# -- a payload that does not parse ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "payload", "line"),
    [
        ("turn", {"text": "hi"}, "turn bad: session: missing"),
        ("turn", ["hi"], "turn bad: the payload is list, not an object"),
        ("turn", {"session": 7}, "turn bad: session: expected a string, got int"),
        ("turn", {"session": "s", "attended": "yes"}, "turn bad: attended: expected true or false"),
        ("turn", {"session": "s", "reply_to": "tg:42"}, "turn bad: reply_to: expected an object"),
        ("turn", {"session": "s", "reply_to": {"chat": "42"}}, "turn bad: reply_to.to: missing"),
        ("turn", {"session": "s", "blocks": [{"type": "image"}]}, "turn bad: blocks[0]: "),
        ("subturn", {"subturn": True, "session": "s"}, "sub-turn bad: spec: missing"),
        (
            "subturn",
            {"subturn": True, "session": "s", "spec": {"task": 5}},
            "sub-turn bad: spec.task: expected a string, got int",
        ),
        ("card", {"card": "c", "attempt": "1"}, "card job bad: attempt: expected an integer"),
        ("schedule.script", {"slot": 1.0}, "slot bad: schedule: missing"),
        ("memory_review", {"agent": "main"}, "memory review bad: session: missing"),
        ("delivery:tg", {"kind": "poll", "to": "tg:42"}, "delivery bad: options: expected a list"),
    ],
)
async def test_a_payload_that_does_not_parse_names_the_job_and_the_field(
    queue: JobQueue, kind: str, payload: Any, line: str
) -> None:
    assert await queue.enqueue("bad", kind, {})
    job = await queue.get("bad")
    assert job is not None
    job.payload = payload  # as a hand-edited database holds it
    with pytest.raises(BadPayload) as caught:
        read(job)
    assert str(caught.value).startswith(line)
    assert "\n" not in str(caught.value)


BROKEN_THEN_FINE = """
- text: "fine"
"""


async def test_a_corrupt_turn_fails_once_with_one_line_and_the_next_turn_runs(
    runtime_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await runtime_factory(mock_config(BROKEN_THEN_FINE))
    session = await runtime.sessions.new_session()
    # An older row or a hand-edited database: no session. The code before read it with
    # payload["session"]: a KeyError in the worker, retried until its attempts ran out.
    await runtime.queue.enqueue("turn_corrupt", "turn", {"text": "hi"}, max_attempts=3)
    with caplog.at_level(logging.WARNING, "habakkuk.engine.pools"):
        runtime.start_workers(channels=False)
        corrupt = await runtime.turns.wait_turn("turn_corrupt")
        fine = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hello"))
    assert (corrupt.status, corrupt.error) == ("failed", "turn turn_corrupt: session: missing")
    job = await runtime.queue.get("turn_corrupt")
    assert job is not None and job.attempts == 1  # failed for good: retrying cannot help
    assert (fine.status, fine.reply) == ("done", "fine")
    [logged] = [r for r in caplog.records if "turn_corrupt" in r.getMessage()]
    assert logged.getMessage() == "turn turn_corrupt: session: missing"
    assert logged.exc_info is None  # one line, no traceback


async def test_a_corrupt_card_job_fails_for_good_through_the_card_pool(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config())
    await runtime.queue.enqueue("card_x_a1", "card", {"card": "card_x", "attempt": 1})
    runtime.start_workers(channels=False)
    settled = await runtime.turns.wait_turn("card_x_a1")
    assert (settled.status, settled.error) == ("failed", "card job card_x_a1: session: missing")
    job = await runtime.queue.get("card_x_a1")
    assert job is not None and job.attempts == 1


# -- the boundary stays typed ------------------------------------------------------------


async def test_a_kind_takes_only_its_own_payload_type(queue: JobQueue) -> None:
    wrong = CardRun("card_1", 1, "ses_1", "main")
    with pytest.raises(TypeError, match="a 'turn' job carries a TurnRequest, not a CardRun"):
        await queue.enqueue("t", "turn", wrong)
    with pytest.raises(TypeError, match="carries a TurnRequest"):
        await queue.enqueue_many([NewJob("t", "turn", wrong)])
    assert await queue.get("t") is None
    await queue.enqueue("c", "card", wrong)
    job = await queue.get("c")
    assert job is not None and payload_of(job, CARD_RUNS) == wrong
    with pytest.raises(TypeError, match="not one of 'subturn'"):
        payload_of(job, SUBTURNS)


def test_every_kind_queued_in_the_code_declares_its_payload_type() -> None:
    for kind in (
        "turn",
        "subturn",
        "card",
        "schedule.prompt",
        "schedule.script",
        "memory_review",
        "memory_nightly",
        "maintenance.retention",
        "delivery:telegram",
    ):
        declared = declared_kind(kind)
        assert declared is not None and declared.payload is not None, kind
    assert declared_kind("delivery:anything") is DELIVERIES


def test_no_module_reads_a_stored_payload_by_key() -> None:
    """Only the payload types' readers look inside stored JSON (engine/payloads.py); a
    module reading `job.payload[...]` or `.payload.get(...)` bypasses them."""
    by_key = re.compile(r"\.payload\s*(\[|\.get\(|\.items\(|\.keys\()")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in ROOT.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if by_key.search(line)
    ]
    assert found == []
