"""The schedules' store on both engines: one contract, run on SQLite and PostgreSQL.

Each test opens control through the `storage` fixture (tests/pg_fixtures.py), so the
same statements are proven against a control.db file and a control schema. Two opens
of one storage are two processes of one home (SQLite) or two nodes on one server
(PostgreSQL): the races below race them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.sql import Conn, Database
from habakkuk.engine.storage import Storage
from habakkuk.work.run_book import Settled
from habakkuk.work.schedule_types import Schedule, SlotRun
from habakkuk.work.store import ScheduleStore
from habakkuk.work.store_book import StoreRunBook

START = 1_800_000_000.0


@pytest.fixture
async def nodes(storage: Storage) -> AsyncIterator[tuple[ScheduleStore, ScheduleStore]]:
    """Two stores on one control, each through a database of its own."""
    first: Database = await storage.open(CONTROL, inline=True)
    second: Database = await storage.open(CONTROL, inline=True)
    try:
        yield await ScheduleStore.open(first), await ScheduleStore.open(second)
    finally:
        await first.close()
        await second.close()


@pytest.fixture
def store(nodes: tuple[ScheduleStore, ScheduleStore]) -> ScheduleStore:
    return nodes[0]


def schedule(
    schedule_id: str,
    *,
    name: str = "",
    agent: str = "main",
    next_run: float | None = START,
    enabled: bool = True,
    created_at: float = START - 100,
    command: str | None = None,
) -> Schedule:
    return Schedule(
        id=schedule_id,
        agent=agent,
        name=name or schedule_id,
        spec="every 1h",
        prompt="" if command else "say hi",
        command=command,
        on_output="deliver",
        deliver_to="telegram:42",
        workdir=None,
        timeout_seconds=120.0,
        missed="skip",
        enabled=enabled,
        next_run=next_run,
        last_run=None,
        last_status="",
        last_output="",
        fail_streak=0,
        created_at=created_at,
        origin="cli",
    )


async def test_a_schedule_reads_back_as_it_was_stored(store: ScheduleStore) -> None:
    stored = schedule("sch_a", command="echo hi")
    assert await store.insert(stored) is None
    assert await store.get("sch_a") == stored
    assert await store.get("sch_missing") is None
    assert await store.counts() == (1, 1)


async def test_a_second_schedule_of_the_same_name_for_an_agent_is_refused_with_the_first_id(
    store: ScheduleStore,
) -> None:
    assert await store.insert(schedule("sch_a", name="Morning  News")) is None
    assert await store.insert(schedule("sch_b", name="morning news")) == "sch_a"
    # Another agent may use the name.
    assert await store.insert(schedule("sch_c", name="morning news", agent="other")) is None
    assert [s.id for s in await store.named("MORNING news")] == ["sch_a", "sch_c"]
    assert await store.counts() == (2, 2)


async def test_two_nodes_adding_one_name_at_once_store_it_once(
    nodes: tuple[ScheduleStore, ScheduleStore],
) -> None:
    first, second = nodes
    for n in range(10):
        name = f"report {n}"
        outcomes = await asyncio.gather(
            first.insert(schedule(f"sch_{n}_a", name=name)),
            second.insert(schedule(f"sch_{n}_b", name=name)),
        )
        winner = f"sch_{n}_a" if outcomes[0] is None else f"sch_{n}_b"
        assert sorted(outcomes, key=str) == sorted([None, winner], key=str)
        assert [s.id for s in await first.named(name)] == [winner]
    assert await first.counts() == (10, 10)


async def test_the_list_puts_the_next_to_run_first_and_paused_and_spent_last(
    store: ScheduleStore,
) -> None:
    await store.insert(schedule("sch_later", next_run=START + 50))
    await store.insert(schedule("sch_soon", next_run=START + 10))
    await store.insert(schedule("sch_spent", next_run=None))
    await store.insert(schedule("sch_paused", next_run=START, enabled=False))
    await store.insert(schedule("sch_other", agent="other", next_run=START + 20))
    assert [s.id for s in await store.all()] == [
        "sch_soon",
        "sch_other",
        "sch_later",
        "sch_spent",
        "sch_paused",
    ]
    assert [s.id for s in await store.all("other")] == ["sch_other"]
    assert await store.counts() == (5, 4)


async def test_due_gives_enabled_schedules_whose_time_has_come_soonest_first(
    store: ScheduleStore,
) -> None:
    await store.insert(schedule("sch_b", next_run=START - 5))
    await store.insert(schedule("sch_a", next_run=START - 50))
    await store.insert(schedule("sch_future", next_run=START + 1))
    await store.insert(schedule("sch_paused", next_run=START - 99, enabled=False))
    await store.insert(schedule("sch_spent", next_run=None))
    assert [s.id for s in await store.due(START)] == ["sch_a", "sch_b"]
    assert [s.id for s in await store.due(START, limit=1)] == ["sch_a"]


async def test_pause_enable_and_delete_say_whether_there_was_such_a_schedule(
    store: ScheduleStore,
) -> None:
    await store.insert(schedule("sch_a"))
    await store.add_runs([SlotRun("sch_a", START, "queued", job="sch_a_1", at=START)])
    assert await store.set_enabled("sch_a", False)
    assert (await store.get("sch_a") or schedule("x")).enabled is False
    assert await store.due(START) == []
    assert await store.set_enabled("sch_a", True)
    assert not await store.set_enabled("sch_missing", True)
    assert await store.delete("sch_a")
    assert not await store.delete("sch_a")
    assert await store.get("sch_a") is None
    assert await store.runs("sch_a") == []


async def test_advance_swaps_next_run_only_from_the_value_read_null_included(
    store: ScheduleStore,
) -> None:
    await store.insert(schedule("sch_a", next_run=START))
    row = SlotRun("sch_a", START, "queued", job="sch_a_1800000000", at=START)
    assert not await store.advance("sch_a", START - 1, START + 3600, rows=[row])
    assert await store.runs("sch_a") == []  # the lost swap wrote nothing
    assert await store.advance("sch_a", START, None, rows=[row])
    assert (await store.get("sch_a") or schedule("x")).next_run is None
    # From a spent one-off (NULL) it swaps only from NULL; `enable` goes with it.
    assert not await store.advance("sch_a", START, START + 10)
    assert await store.advance("sch_a", None, START + 10, enable=False)
    after = await store.get("sch_a")
    assert after is not None and (after.next_run, after.enabled) == (START + 10, False)
    assert [r.job for r in await store.runs("sch_a")] == ["sch_a_1800000000"]


async def test_advance_many_tells_each_swap_and_records_only_the_winners_rows(
    store: ScheduleStore,
) -> None:
    await store.insert(schedule("sch_a", next_run=START))
    await store.insert(schedule("sch_b", next_run=None))
    await store.insert(schedule("sch_c", next_run=START))
    won = await store.advance_many(
        [
            ("sch_a", START, START + 60, [SlotRun("sch_a", START, "queued", at=START)]),
            ("sch_b", None, START + 60, [SlotRun("sch_b", START, "skipped", at=START)]),
            ("sch_c", START - 1, START + 60, [SlotRun("sch_c", START, "queued", at=START)]),
        ]
    )
    assert won == [True, True, False]
    assert [r.status for r in await store.runs("sch_a")] == ["queued"]
    assert [r.status for r in await store.runs("sch_b")] == ["skipped"]
    assert await store.runs("sch_c") == []
    assert await store.advance_many([]) == []


async def test_two_nodes_advancing_one_slot_at_once_record_it_once(
    nodes: tuple[ScheduleStore, ScheduleStore],
) -> None:
    first, second = nodes
    for n in range(20):
        await first.insert(schedule(f"sch_{n}", next_run=START))
    swaps = [
        (f"sch_{n}", START, START + 3600, [SlotRun(f"sch_{n}", START, "queued", at=START)])
        for n in range(20)
    ]
    one, two = await asyncio.gather(first.advance_many(swaps), second.advance_many(swaps))
    # Each schedule's slot: exactly one node won its swap, and one row recorded it.
    assert all(a != b for a, b in zip(one, two, strict=True))
    for n in range(20):
        assert [r.slot for r in await second.runs(f"sch_{n}")] == [START]
        stored = await second.get(f"sch_{n}")
        assert stored is not None and stored.next_run == START + 3600


async def test_a_slot_already_recorded_keeps_its_row(
    nodes: tuple[ScheduleStore, ScheduleStore],
) -> None:
    first, second = nodes
    await first.insert(schedule("sch_a"))
    queued = SlotRun("sch_a", START, "queued", job="sch_a_1800000000", at=START)
    skipped = SlotRun("sch_a", START, "skipped", reason="late", at=START + 5)
    await asyncio.gather(first.add_runs([queued]), second.add_runs([skipped]))
    rows = await first.runs("sch_a")
    assert len(rows) == 1 and rows[0].status in ("queued", "skipped")
    await first.add_runs([SlotRun("sch_a", START, "failed", at=START + 9)])
    assert await first.runs("sch_a") == rows
    # An extra run of the same time is a row of its own.
    await first.add_runs([SlotRun("sch_a", START, "queued", job="sch_a_run_1", extra=True)])
    assert [(r.slot, r.extra) for r in await first.runs("sch_a")] == [
        (START, False),
        (START, True),
    ]


async def test_set_run_upserts_a_slots_outcome_keeping_what_it_does_not_name(
    store: ScheduleStore,
) -> None:
    await store.insert(schedule("sch_a"))
    await store.add_runs([SlotRun("sch_a", START, "queued", job="sch_a_1", at=START)])
    await store.set_run("sch_a", START, "running", session="ses_1")
    await store.set_run("sch_a", START, "ran", delivered=True)
    (row,) = await store.runs("sch_a")
    assert (row.status, row.job, row.session, row.delivered) == ("ran", "sch_a_1", "ses_1", True)
    await store.set_run("sch_a", START, "delivery_failed", reason="chat gone", delivered=False)
    (row,) = await store.runs("sch_a")
    assert (row.status, row.reason, row.delivered) == ("delivery_failed", "chat gone", False)
    # A slot never recorded gets a row.
    await store.set_run("sch_a", START + 60, "failed", extra=True, reason="boom")
    newest = (await store.runs("sch_a"))[0]
    assert (newest.slot, newest.extra, newest.status, newest.reason, newest.delivered) == (
        START + 60,
        True,
        "failed",
        "boom",
        None,
    )
    assert await store.run_for_job("sch_a_1") == row
    assert await store.run_for_job("sch_missing") is None


async def test_runs_are_newest_slot_first_and_bounded(store: ScheduleStore) -> None:
    await store.insert(schedule("sch_a"))
    await store.add_runs(
        SlotRun("sch_a", START + n * 60, "skipped", reason="late", at=START) for n in range(5)
    )
    assert [r.slot for r in await store.runs("sch_a", limit=3)] == [
        START + 240,
        START + 180,
        START + 120,
    ]


async def test_record_result_keeps_the_output_and_streak_it_is_not_given(
    store: ScheduleStore,
) -> None:
    await store.insert(schedule("sch_a"))
    await store.record_result(
        "sch_a", last_run=START, last_status="error: exit 1", last_output="out", fail_streak=2
    )
    await store.record_result("sch_a", last_run=START + 1, last_status="delivery failed: x")
    after = await store.get("sch_a")
    assert after is not None
    assert (after.last_run, after.last_status, after.last_output, after.fail_streak) == (
        START + 1,
        "delivery failed: x",
        "out",
        2,
    )


async def test_a_delivery_settling_before_its_run_is_kept_by_the_run_book(
    store: ScheduleStore,
) -> None:
    book = StoreRunBook(store)
    await store.insert(schedule("sch_a"))
    await store.add_runs([SlotRun("sch_a", START, "queued", job="sch_a_run_1", extra=True)])
    await book.run_started("sch_a_run_1", session="ses_x")
    await book.delivery_settled("sch_a_run_1", delivered=False, reason="chat gone")
    await book.run_settled("sch_a_run_1", Settled("ran", last_status="ok", last_output="hi"))
    (row,) = await store.runs("sch_a")
    assert (row.status, row.reason, row.delivered, row.session) == (
        "delivery_failed",
        "chat gone",
        False,
        "ses_x",
    )
    after = await store.get("sch_a")
    assert after is not None
    assert (after.last_status, after.last_output) == ("delivery failed: chat gone", "hi")


async def test_a_run_and_its_failed_delivery_settling_at_once_on_two_nodes_agree(
    nodes: tuple[ScheduleStore, ScheduleStore],
) -> None:
    first, second = nodes
    runs, deliveries = StoreRunBook(first), StoreRunBook(second)
    for n in range(12):
        schedule_id, job = f"sch_{n}", f"sch_{n}_run_1"
        await first.insert(schedule(schedule_id))
        await first.add_runs([SlotRun(schedule_id, START, "running", job=job, extra=True)])
        await asyncio.gather(
            runs.run_settled(job, Settled("ran", last_status="ok", last_output="out")),
            deliveries.delivery_settled(job, delivered=False, reason="chat gone"),
        )
        # Whichever came first, the row and the schedule say the message did not arrive.
        (row,) = await first.runs(schedule_id)
        assert (row.status, row.reason, row.delivered) == ("delivery_failed", "chat gone", False)
        after = await second.get(schedule_id)
        assert after is not None
        assert (after.last_status, after.last_output) == ("delivery failed: chat gone", "out")


async def test_a_run_book_write_for_a_job_without_a_slot_row_is_logged_not_raised(
    store: ScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    book = StoreRunBook(store)
    with caplog.at_level(logging.WARNING, logger="habakkuk.work.store_book"):
        await book.run_settled("sch_gone_run_1", Settled("ran", last_status="ok"))
        await book.delivery_settled("sch_gone_run_1", delivered=True)
    assert [r.getMessage() for r in caplog.records] == [
        "schedule run sch_gone_run_1 has no slot row; its outcome is not recorded"
    ] * 2


async def test_an_unreadable_schedule_is_logged_and_skipped_never_hiding_the_others(
    store: ScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.insert(schedule("sch_good", next_run=START))
    await store.insert(schedule("sch_bad", next_run=START - 1))

    def corrupt(conn: Conn) -> None:
        conn.execute("UPDATE schedules SET body = '[1, 2' WHERE id = 'sch_bad'")

    await store.db.write(corrupt)
    with caplog.at_level(logging.WARNING, logger="habakkuk.work.store"):
        assert [s.id for s in await store.all()] == ["sch_good"]
        assert [s.id for s in await store.due(START)] == ["sch_good"]
    assert any("sch_bad: unreadable row" in r.getMessage() for r in caplog.records)


async def test_stores_opening_together_on_two_nodes_create_the_tables_once(
    storage: Storage,
) -> None:
    dbs = [await storage.open(CONTROL, inline=True) for _ in range(2)]
    try:
        stores = await asyncio.gather(*(ScheduleStore.open(dbs[n % 2]) for n in range(6)))
        await stores[0].insert(schedule("sch_a"))
        await ScheduleStore.open(dbs[1])  # once they exist, opening leaves them be
        assert await stores[5].counts() == (1, 1)
    finally:
        for db in dbs:
            await db.close()
