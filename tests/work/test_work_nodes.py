"""The schedules, the board and delegation with the real queue on both engines.

Two opens of one storage are two processes of one home (SQLite) or two nodes on one
PostgreSQL server. Normally one ticker and one dispatcher hold their named lease;
here each node's runs under a lease name of its own, so both act at the same moment
and only the slot and claim guards stand between them and a double: a slot's job id
and its row, a card's compare-and-swap and its attempt's job id.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import cast

import pytest

from habakkuk.channels.outbox import Outbox
from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.home import Home
from habakkuk.engine.outbox_access import TextOutbox
from habakkuk.engine.storage import Storage
from habakkuk.work.board_dispatch import Dispatcher
from habakkuk.work.board_store import BoardStore
from habakkuk.work.board_types import CARD_KIND, card_job_id
from habakkuk.work.delegation_store import DelegationStore
from habakkuk.work.delegation_types import SUBTURN_KIND
from habakkuk.work.run_book import delivery_id_for
from habakkuk.work.schedule_types import NewSchedule
from habakkuk.work.scheduler import Scheduler
from habakkuk.work.service import KINDS, serial_key, slot_job_id
from tests.work.schedules_env import Control, FakeClock, config_in, open_node

START = dt.datetime(2026, 6, 1, 9, 7, tzinfo=dt.UTC).timestamp()


@pytest.fixture
async def nodes(storage: Storage, home: Home) -> AsyncIterator[tuple[Control, Control, FakeClock]]:
    clock = FakeClock(START)
    config = config_in(home, "UTC")
    first = await open_node(storage, config, clock)
    second = await open_node(storage, config, clock)
    try:
        yield first, second, clock
    finally:
        await first.close()
        await second.close()


async def test_two_nodes_ticking_at_the_same_moment_fire_each_slot_once(
    nodes: tuple[Control, Control, FakeClock],
) -> None:
    first, second, clock = nodes
    added = []
    for n in range(12):
        command = "true" if n % 3 == 0 else None
        new = NewSchedule(
            agent="main", name=f"s{n}", when="@every 10m", prompt="go", command=command
        )
        added.append(await first.schedules.add(new, by="owner"))
    tickers = [
        Scheduler(first.schedules, clock=clock, lease_name="schedules:one"),
        Scheduler(second.schedules, clock=clock, lease_name="schedules:two"),
    ]
    queued = 0
    for _ in range(6):
        clock.advance(600)
        reports = await asyncio.gather(*(t.tick() for t in tickers))
        assert all(r.held_by is None for r in reports)  # both ticked
        queued += sum(r.queued for r in reports)
        # The workers keep up: every slot's job ends before the next tick.
        while (lease := await first.queue.claim(KINDS)) is not None:
            await first.queue.complete(lease)
    jobs = [str(r["id"]) for r in await first.db.fetchall("SELECT id FROM jobs")]
    assert len(jobs) == len(set(jobs)) == queued == 12 * 6
    for schedule in added:
        rows = await second.schedules.runs(schedule.id)
        assert sorted(r.slot for r in rows) == sorted({r.slot for r in rows})
        assert {r.job for r in rows} == {slot_job_id(schedule.id, r.slot) for r in rows}
        assert {r.job for r in rows} <= set(jobs)
        assert [r.status for r in rows] == ["queued"] * 6


async def test_a_script_slot_interrupted_on_one_node_says_so_on_the_other(
    nodes: tuple[Control, Control, FakeClock],
) -> None:
    first, second, clock = nodes
    new = NewSchedule(agent="main", name="sync", when="@every 10m", prompt="", command="true")
    schedule = await first.schedules.add(new, by="owner")
    clock.advance(600)
    assert (await Scheduler(first.schedules, clock=clock).tick()).queued == 1
    lease = await first.queue.claim(KINDS)
    assert lease is not None
    # Its worker died mid-run: the queue ends the job, and the slot's row says why, in
    # the same transaction.
    await first.queue.interrupted(lease, "died")
    (row,) = await second.schedules.runs(schedule.id)
    assert (row.job, row.status) == (lease.job.id, "interrupted")
    assert row.reason and "died" in row.reason
    stored = await second.schedules.get(schedule.id)
    assert stored.last_status == f"interrupted: {row.reason}"


async def test_a_slots_output_queued_from_two_nodes_is_delivered_once(
    nodes: tuple[Control, Control, FakeClock],
) -> None:
    """A slot's run retried on another node (the first died after queueing its output)
    queues the output again under the same id, derived from the slot's job: one
    delivery job, whichever node got there first."""
    first, second, _ = nodes
    for n in range(10):
        job = f"sch_abc_{1_800_000_000 + n * 60}"
        outcomes = await asyncio.gather(
            Outbox(first.queue).send_text(delivery_id_for(job), "telegram:42", "disk at 91%"),
            Outbox(second.queue).send_text(delivery_id_for(job), "telegram:42", "disk at 91%"),
        )
        assert sorted(outcomes) == [False, True]
    rows = await first.db.fetchall("SELECT id, kind FROM jobs ORDER BY id")
    assert [(r["id"], r["kind"]) for r in rows] == [
        (delivery_id_for(f"sch_abc_{1_800_000_000 + n * 60}"), "delivery:telegram")
        for n in range(10)
    ]


async def test_job_facts_read_which_jobs_exist_and_each_serial_keys_active_jobs(
    nodes: tuple[Control, Control, FakeClock],
) -> None:
    first, _, _ = nodes
    store = first.schedules.store
    await store.ensure()
    await first.queue.enqueue("sch_a_1", "schedule.script", {"x": 1}, serial_key=serial_key("a"))
    await first.queue.enqueue("sch_a_2", "schedule.script", {"x": 2}, serial_key=serial_key("a"))
    await first.queue.enqueue("sch_b_1", "schedule.script", {"x": 3}, serial_key=serial_key("b"))
    await first.queue.cancel("sch_b_1")
    found, active = await store.job_facts(
        ["sch_a_1", "sch_b_1", "sch_c_1"], [serial_key("a"), serial_key("b")]
    )
    assert found == {"sch_a_1", "sch_b_1"}
    assert active == {serial_key("a"): {"sch_a_1", "sch_a_2"}}


async def test_two_dispatchers_looking_at_the_same_moment_queue_each_attempt_once(
    nodes: tuple[Control, Control, FakeClock], home: Home
) -> None:
    first, second, _ = nodes
    # Neither look notifies anybody (no card becomes done or blocked): no turn, no outbox.
    turns = cast(TurnsAccess, object())

    def no_outbox() -> TextOutbox:
        raise AssertionError("no notice is sent in this test")

    dispatchers = [
        Dispatcher(BoardStore(node.db), node.queue, turns, no_outbox, home.root, lease_name=name)
        for node, name in ((first, "board:one"), (second, "board:two"))
    ]
    store = dispatchers[0].store
    for n in range(25):
        await store.insert(
            card_id=f"card_{n:010d}",
            title=f"card {n}",
            body="",
            assignee="main",
            created_by="user",
            priority=n % 4,
            parent=None,
            depends_on=(),
        )
    reports = await asyncio.gather(*(d.look() for d in dispatchers))
    assert all(r.held_by is None for r in reports)
    assert sum(r.dispatched for r in reports) + sum(r.repaired for r in reports) == 25
    jobs = [
        str(r["id"])
        for r in await first.db.fetchall("SELECT id FROM jobs WHERE kind = ?", (CARD_KIND,))
    ]
    assert sorted(jobs) == sorted(card_job_id(f"card_{n:010d}", 1) for n in range(25))
    for n in range(25):
        card = await BoardStore(second.db).fetch(f"card_{n:010d}")
        assert card is not None and (card.status, card.attempt) == ("doing", 1)
        assert [e.kind for e in card.events] == ["created", "claimed"]
    # Another look from each finds nothing to do.
    again = await asyncio.gather(*(d.look() for d in dispatchers))
    assert [(r.dispatched, r.repaired) for r in again] == [(0, 0), (0, 0)]


async def test_a_sessions_children_and_the_notices_owed_are_read_off_the_jobs(
    nodes: tuple[Control, Control, FakeClock],
) -> None:
    first, second, _ = nodes
    store = DelegationStore(first.db)

    def spec(parent: str, *, background: bool) -> dict[str, object]:
        return {"spec": {"parent_session": parent, "background": background}}

    await first.queue.enqueue("sub_fg", SUBTURN_KIND, spec("ses_p", background=False))
    await first.queue.enqueue("sub_bg", SUBTURN_KIND, spec("ses_p", background=True))
    await first.queue.enqueue("sub_other", SUBTURN_KIND, spec("ses_q", background=True))
    await first.queue.enqueue("sub_stopped", SUBTURN_KIND, spec("ses_p", background=False))
    assert [r["id"] for r in await store.children(SUBTURN_KIND, "ses_p", active_only=True)] == [
        "sub_fg",
        "sub_bg",
        "sub_stopped",
    ]
    # The stop is recorded on one node, the child ends there; the other reads both.
    await DelegationStore(second.db).record_stop("sub_stopped", "stopped", "by hand", 1.0)
    for job in ("sub_fg", "sub_bg", "sub_stopped"):
        await second.queue.cancel(job)
    assert await store.children(SUBTURN_KIND, "ses_p", active_only=True) == []
    ended = await store.children(SUBTURN_KIND, "ses_p", active_only=False)
    assert [r["id"] for r in ended] == ["sub_fg", "sub_bg", "sub_stopped"]
    # Owed a notice: the background child and the one stopped by hand, until their
    # notice turn exists.
    owed = await store.notices_owed(SUBTURN_KIND, "turn_")
    assert sorted(r["id"] for r in owed) == ["sub_bg", "sub_stopped"]
    await first.queue.enqueue("turn_sub_bg", "turn", {"session": "ses_p"})
    assert [r["id"] for r in await store.notices_owed(SUBTURN_KIND, "turn_")] == ["sub_stopped"]
