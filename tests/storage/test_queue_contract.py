"""The job queue, named leases and the jobs' retention: one contract, both engines.

Every test here runs on SQLite and on PostgreSQL (the `storage` fixture), so the two
cannot drift. What only one engine does (SQLite's query plans and inline writes,
PostgreSQL's concurrent nodes and notifications) is tested beside its engine.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.engine import jobs as jobs_module
from habakkuk.engine.agent.requests import TURN_KIND, TurnRequest
from habakkuk.engine.errors import LeaseLost
from habakkuk.engine.jobs import (
    SCHEMA,
    JobKind,
    JobQueue,
    Lease,
    NewJob,
    Owner,
    declare_kind,
    enqueue_in,
)
from habakkuk.engine.leases import NamedLeases
from habakkuk.engine.pools import PermanentJobError, Pool
from habakkuk.engine.retention import prune_jobs
from habakkuk.engine.sessions import Session, TranscriptStore
from habakkuk.engine.silent import SILENT
from habakkuk.engine.sql import Conn, Database
from habakkuk.engine.state import SCHEMA as STATE_SCHEMA
from habakkuk.engine.storage import Storage
from tests.helpers import eventually

ONCE_KIND = "contract.once"
declare_kind(JobKind(ONCE_KIND, at_most_once=True))


@pytest.fixture
async def control(storage: Storage) -> AsyncIterator[Database]:
    db = await storage.open(SCHEMA, inline=True)
    yield db
    await db.close()


@pytest.fixture
def queue(control: Database) -> JobQueue:
    return JobQueue(control)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def claimed(queue: JobQueue, kinds: list[str]) -> Lease:
    lease = await queue.claim(kinds)
    assert lease is not None, f"no job of {kinds} to claim"
    return lease


# -- enqueue -------------------------------------------------------------------------


async def test_enqueue_is_idempotent_by_id(queue: JobQueue) -> None:
    assert await queue.enqueue("job-1", "k", {"n": 1}) is True
    assert await queue.enqueue("job-1", "k", {"n": 2}) is False
    job = await queue.get("job-1")
    assert job is not None and (job.payload, job.status, job.attempts) == ({"n": 1}, "queued", 0)


async def test_enqueue_many_queues_the_new_ids_and_wakes_the_listeners(queue: JobQueue) -> None:
    woken: list[str] = []
    queue.add_listener(woken.append)
    await queue.enqueue("a", "k", {"n": 0})
    created = await queue.enqueue_many(
        [
            NewJob("a", "k", {"n": 1}),
            NewJob("b", "k", {"n": 2}, serial_key="s", max_attempts=1, agent="ada"),
        ]
    )
    assert created == ["b"]
    b = await queue.get("b")
    assert b is not None
    assert (b.serial_key, b.max_attempts, b.payload, b.agent) == ("s", 1, {"n": 2}, "ada")
    assert woken == ["k", "k"]


async def test_a_burst_of_enqueues_in_one_pass_is_each_told_its_own_outcome(
    queue: JobQueue,
) -> None:
    await queue.enqueue("dup", "k")
    outcomes = await asyncio.gather(*(queue.enqueue(f"j{i}", "k") for i in range(20)),
                                    queue.enqueue("dup", "k"))  # fmt: skip
    assert outcomes == [True] * 20 + [False]
    assert (await queue.depth())[("k", "queued")] == 21
    # One id twice in one pass: new the first time only.
    twice = await asyncio.gather(queue.enqueue("twice", "k"), queue.enqueue("twice", "k"))
    assert list(twice) == [True, False]


async def test_a_turn_queued_in_its_sessions_transaction_belongs_to_its_agent(
    storage: Storage, control: Database
) -> None:
    # The path of every turn (SessionAccess.queue_for): the session read and the job
    # queued in one transaction on the transcripts' connection, control attached.
    await (await storage.open(STATE_SCHEMA)).close()  # migrated before the transcripts attach it
    transcripts = await TranscriptStore.open_on(storage)
    try:
        await transcripts.create_session("ses_1", "ada", "prompt")

        def _queue(conn: Conn, session: Session) -> bool:
            request = TurnRequest(session.id, "hi")
            return enqueue_in(
                conn, "turn_1", TURN_KIND, request, serial_key=session.id, agent=session.agent
            )

        queued = await transcripts.with_session("ses_1", _queue)
    finally:
        await transcripts.close()
    assert queued is not None and queued[1] is True
    hosting_bob = JobQueue(control, hosted_agents=frozenset({"bob"}))
    assert await hosting_bob.claim([TURN_KIND]) is None
    lease = await claimed(JobQueue(control, hosted_agents=frozenset({"ada"})), [TURN_KIND])
    assert (lease.job.agent, lease.job.serial_key, lease.job.payload["text"]) == (
        "ada",
        "ses_1",
        "hi",
    )


# -- claim ---------------------------------------------------------------------------


async def test_a_claim_takes_the_oldest_runnable_job_of_its_kinds(queue: JobQueue) -> None:
    await queue.enqueue("a", "other")
    await queue.enqueue("b", "k")
    await queue.enqueue("later", "k", delay=3600)
    await queue.enqueue("c", "k")
    first = await claimed(queue, ["k"])
    assert (first.job.id, first.job.status, first.job.attempts) == ("b", "running", 1)
    assert first.job.lease_owner == str(queue.owner)
    many = await queue.claim_many(["k", "other"], 5)
    assert [lease.job.id for lease in many] == ["a", "c"]
    assert await queue.claim(["k"]) is None
    assert [job.id for job in await queue.upcoming()] == ["later"]
    assert await queue.depth() == {("k", "running"): 2, ("other", "running"): 1, ("k", "queued"): 1}


async def test_a_serial_key_runs_one_job_at_a_time_oldest_first(queue: JobQueue) -> None:
    for i in range(3):
        await queue.enqueue(f"s{i}", "k", serial_key="session")
    await queue.enqueue("free", "k")
    leases = await queue.claim_many(["k"], 10)
    assert [lease.job.id for lease in leases] == ["s0", "free"]
    assert [job.id for job in await queue.active_for("session")] == ["s0", "s1", "s2"]
    order = []
    lease: Lease | None = leases[0]
    while lease is not None:
        order.append(lease.job.id)
        assert await queue.claim(["k"]) is None  # the key is held
        ours, lease = await queue.complete_and_claim(lease, {"ok": True}, ["k"])
        assert ours
    assert order == ["s0", "s1", "s2"]
    assert await queue.active_for("session") == []


async def test_a_queue_claims_only_the_jobs_of_the_agents_it_hosts(control: Database) -> None:
    anyone = JobQueue(control)
    for job_id, agent in [("ada-1", "ada"), ("bob-1", "bob"), ("none-1", ""), ("ada-2", "ada")]:
        await anyone.enqueue(job_id, "k", agent=agent)
    hosting_ada = JobQueue(control, hosted_agents=frozenset({"ada"}))
    first = await claimed(hosting_ada, ["k"])
    rest = await hosting_ada.claim_many(["k"], 10)
    assert [first.job.id, *(lease.job.id for lease in rest)] == ["ada-1", "none-1", "ada-2"]
    assert first.job.agent == "ada"
    hosting_none = JobQueue(control, hosted_agents=frozenset())
    assert await hosting_none.claim(["k"]) is None  # only bob's is left
    assert [lease.job.id for lease in await anyone.claim_many(["k"], 10)] == ["bob-1"]


# -- while running -------------------------------------------------------------------


async def test_complete_writes_only_while_the_lease_is_ours(control: Database) -> None:
    queue = JobQueue(control)
    await queue.enqueue("a", "k")
    lease = await claimed(queue, ["k"])
    thief = Lease(lease.job, "someone-else", 30.0)
    with pytest.raises(LeaseLost):
        await queue.complete(thief)
    await control.write(lambda conn: lease.check(conn, "main"))
    with pytest.raises(LeaseLost):
        await control.write(lambda conn: thief.check(conn, "main"))
    await queue.complete(lease, {"answer": 42})
    job = await queue.get("a")
    assert job is not None and (job.status, job.result, job.lease_owner) == (
        "done",
        {"answer": 42},
        None,
    )
    with pytest.raises(LeaseLost):
        await queue.complete(lease)


async def test_settling_several_jobs_completes_only_those_still_ours(queue: JobQueue) -> None:
    for i in range(4):
        await queue.enqueue(f"j{i}", "k")
    leases = await queue.claim_many(["k"], 3)
    lost = Lease(leases[1].job, "someone-else", 30.0)
    results = [(leases[0], {"n": 0}), (lost, {"n": 1}), (leases[2], None)]
    finished, claimed = await queue.settle_and_claim(results, ["k"], 5)
    assert finished == [True, False, True]
    assert [lease.job.id for lease in claimed] == ["j3"]
    first, second, third = [await queue.get(f"j{i}") for i in range(3)]
    assert first is not None and (first.status, first.result) == ("done", {"n": 0})
    assert second is not None and second.status == "running"
    assert third is not None and (third.status, third.result) == ("done", None)


async def test_a_heartbeat_extends_the_lease_and_hears_a_cancel(queue: JobQueue) -> None:
    await queue.enqueue("a", "k")
    lease = await claimed(queue, ["k"])
    before = lease.job.lease_until
    assert await queue.heartbeat(lease) is True and not lease.job.cancel_requested
    job = await queue.get("a")
    assert job is not None and before is not None and (job.lease_until or 0) >= before
    assert await queue.cancel("a") == "running"
    assert await queue.heartbeat(lease) is True and lease.job.cancel_requested
    await queue.cancelled(lease, {"stopped": True})
    assert await queue.heartbeat(lease) is False
    gone = await queue.get("a")
    assert gone is not None and gone.status == "cancelled"


async def test_a_heartbeat_of_several_leases_tells_each_apart(queue: JobQueue) -> None:
    for i in range(3):
        await queue.enqueue(f"j{i}", "k")
    first, second, third = await queue.claim_many(["k"], 3)
    assert await queue.cancel("j1") == "running"
    lost = Lease(third.job, "someone-else", 30.0)
    assert await queue.heartbeat_many([first, second, lost]) == [True, True, False]
    assert (first.job.cancel_requested, second.job.cancel_requested) == (False, True)


async def test_cancel_stops_a_queued_job_and_knows_no_unknown_one(queue: JobQueue) -> None:
    await queue.enqueue("a", "k")
    assert await queue.cancel("a") == "cancelled"
    assert await queue.cancel("a") == "cancelled"
    assert await queue.cancel("nope") is None
    assert await queue.claim(["k"]) is None


async def test_a_failure_retries_with_backoff_then_fails_for_good(queue: JobQueue) -> None:
    await queue.enqueue("a", "k", max_attempts=2)
    lease = await claimed(queue, ["k"])
    assert await queue.fail(lease, "boom") == "queued"
    job = await queue.get("a")
    assert job is not None and job.status == "queued" and job.run_after > time.time()
    assert await queue.claim(["k"]) is None  # backing off
    await queue.db.write(lambda conn: conn.execute("UPDATE jobs SET run_after = 0"))
    again = await claimed(queue, ["k"])
    assert again.job.attempts == 2
    assert await queue.fail(again, "boom again") == "failed"
    assert [job.id for job in await queue.recent_failures()] == ["a"]
    assert await queue.failed_count("k", "boom", 0) == 1
    assert await queue.failed_count("k", "other", 0) == 0


async def test_the_error_list_can_leave_out_what_is_told_otherwise(queue: JobQueue) -> None:
    for job_id, error in (("real", "boom"), ("paused", f"{SILENT} Paused: the daily budget")):
        await queue.enqueue(job_id, "k", max_attempts=1)
        assert await queue.fail(await claimed(queue, ["k"]), error) == "failed"
    assert {job.id for job in await queue.recent_failures()} == {"real", "paused"}
    assert [job.id for job in await queue.recent_failures(errors_only=True)] == ["real"]


async def test_a_released_job_gets_its_attempt_back(queue: JobQueue) -> None:
    await queue.enqueue("a", "k")
    lease = await claimed(queue, ["k"])
    await queue.release(lease)
    job = await queue.get("a")
    assert job is not None and (job.status, job.attempts, job.lease_owner) == ("queued", 0, None)


async def test_an_interrupted_at_most_once_job_ends_failed(queue: JobQueue) -> None:
    await queue.enqueue("once", ONCE_KIND, max_attempts=5)
    lease = await claimed(queue, [ONCE_KIND])
    assert lease.job.max_attempts == 1
    await queue.interrupted(lease)
    job = await queue.get("once")
    assert job is not None and job.status == "failed"
    assert job.error is not None and "at most once" in job.error
    with pytest.raises(LeaseLost):
        await queue.interrupted(lease)


# -- taking jobs back ----------------------------------------------------------------


async def test_an_expired_lease_is_taken_back_and_the_job_runs_again(control: Database) -> None:
    gone = JobQueue(control, owner=Owner("elsewhere", 1, "dead"), lease_seconds=-1.0)
    await gone.enqueue("a", "k")
    await claimed(gone, ["k"])
    taker = JobQueue(control)
    lease = await claimed(taker, ["k"])  # its first claim reaps
    assert (lease.job.id, lease.job.attempts) == ("a", 2)
    assert lease.job.error is not None and "stopped renewing its lease" in lease.job.error


async def test_a_dead_process_on_this_host_loses_its_jobs_at_once(control: Database) -> None:
    here = Owner.current()
    dead = JobQueue(control, owner=Owner(here.host, dead_pid(), "gone"))
    await dead.enqueue("a", "k")
    await dead.enqueue("last", "k", max_attempts=1)
    await dead.claim_many(["k"], 2)
    taker = JobQueue(control, owner=here)
    lease = await claimed(taker, ["k"])
    assert lease.job.id == "a" and "died mid-run" in (lease.job.error or "")
    last = await taker.get("last")
    assert last is not None and last.status == "failed"
    assert "none left" in (last.error or "")


async def test_another_hosts_live_lease_is_not_judged_by_its_pid(control: Database) -> None:
    # The pid is dead here, but it names a process of another machine.
    other = JobQueue(control, owner=Owner("another-host", dead_pid(), "far"))
    await other.enqueue("a", "k")
    await claimed(other, ["k"])
    taker = JobQueue(control)
    assert await taker.claim(["k"]) is None
    job = await taker.get("a")
    assert job is not None and job.status == "running"


# -- pinned jobs (a client of one process follows them live) -------------------------


async def pin(control: Database, job_id: str, queue: JobQueue) -> None:
    """Queue `job_id` (kind k) pinned to `queue`'s process."""
    await control.write(lambda conn: enqueue_in(conn, job_id, "k", schema="main", node=queue.node))


async def test_a_pinned_job_is_claimed_only_by_its_own_process(control: Database) -> None:
    terminal, server = JobQueue(control), JobQueue(control)
    await pin(control, "mine", terminal)
    await server.enqueue("anyones", "k")
    assert [lease.job.id for lease in await server.claim_many(["k"], 5)] == ["anyones"]
    assert (await claimed(terminal, ["k"])).job.id == "mine"


async def test_a_pinned_job_taken_back_from_a_dead_run_runs_anywhere(control: Database) -> None:
    here = Owner.current()
    terminal = JobQueue(control, owner=Owner(here.host, dead_pid(), "killed"))
    await pin(control, "turn", terminal)
    await claimed(terminal, ["k"])  # then the terminal is killed mid-turn
    server = JobQueue(control, owner=here)
    lease = await claimed(server, ["k"])  # its claim reaps: queued again, unpinned
    assert (lease.job.id, lease.job.attempts) == ("turn", 2)


async def test_a_pinned_job_given_back_at_a_clean_stop_runs_anywhere(
    control: Database,
) -> None:
    terminal, server = JobQueue(control), JobQueue(control)
    await pin(control, "turn", terminal)
    await terminal.release(await claimed(terminal, ["k"]))  # the terminal quits mid-turn
    assert (await claimed(server, ["k"])).job.id == "turn"


async def test_a_job_still_queued_for_a_dead_process_is_freed(control: Database) -> None:
    here = Owner.current()
    terminal = JobQueue(control, owner=Owner(here.host, dead_pid(), "killed"))
    live = JobQueue(control, owner=Owner("another-host", 1, "idle"))
    await pin(control, "waiting", terminal)
    await pin(control, "elsewhere", live)  # another host's: its pid says nothing here
    server = JobQueue(control, owner=here)
    assert (await claimed(server, ["k"])).job.id == "waiting"
    assert await server.claim(["k"]) is None  # queued just now: within the grace


async def test_another_hosts_pin_is_freed_after_the_grace_without_a_live_lease(
    control: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    far = JobQueue(control, owner=Owner("another-host", 1, "gone"))
    await pin(control, "stranded", far)
    monkeypatch.setattr(jobs_module, "PIN_GRACE_SECONDS", -1.0)
    assert (await claimed(JobQueue(control), ["k"])).job.id == "stranded"


# -- pools ---------------------------------------------------------------------------


async def test_a_pool_runs_each_job_once_and_settles_its_outcome(queue: JobQueue) -> None:
    ran: list[str] = []

    async def handle(lease: Lease) -> dict[str, Any] | None:
        ran.append(lease.job.id)
        if lease.job.id == "bad":
            raise PermanentJobError("cannot")
        return {"id": lease.job.id}

    pool = Pool(queue, ["k"], handle, concurrency=3, poll_interval=0.05)
    pool.start()
    try:
        for i in range(8):
            await queue.enqueue(f"j{i}", "k", serial_key="s" if i % 2 else "")
        await queue.enqueue("bad", "k")

        async def settled() -> bool:
            return not await queue.depth()

        await eventually(settled, what="every job settled")
    finally:
        await pool.stop()
    assert sorted(ran) == sorted([f"j{i}" for i in range(8)] + ["bad"])
    done = await queue.get("j3")
    bad = await queue.get("bad")
    assert done is not None and done.result == {"id": "j3"}
    assert bad is not None and (bad.status, bad.error) == ("failed", "cannot")


# -- named leases --------------------------------------------------------------------


@pytest.fixture
async def leases(control: Database) -> NamedLeases:
    named = NamedLeases(control)
    await named.ensure()
    await named.ensure()  # idempotent
    return named


async def test_a_named_lease_has_one_holder_until_it_runs_out(leases: NamedLeases) -> None:
    assert await leases.acquire("tick", "a", 60, now=1000.0) is None
    assert await leases.acquire("tick", "b", 60, now=1030.0) == "a"
    assert await leases.acquire("tick", "a", 60, now=1030.0) is None  # renewed
    assert await leases.acquire("tick", "b", 60, now=1091.0) is None  # a ran out
    assert await leases.holder("tick", now=1092.0) == "b"
    assert await leases.live_holder("tick", now=1092.0) == "b"


async def test_a_named_lease_of_a_dead_process_here_is_taken_at_once(leases: NamedLeases) -> None:
    now = time.time()
    assert await leases.acquire("tick", "gone", 3600, now=now, pid=dead_pid()) is None
    assert await leases.live_holder("tick", now=now + 1) is None
    assert await leases.acquire("tick", "new", 60, now=now + 1) is None
    assert await leases.holder("tick", now=now + 2) == "new"


async def test_a_named_lease_of_another_host_waits_for_its_time(
    leases: NamedLeases, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HABAKKUK_HOSTNAME", "alpha")
    assert await leases.acquire("tick", "on-alpha", 60, now=1000.0, pid=dead_pid()) is None
    monkeypatch.setenv("HABAKKUK_HOSTNAME", "beta")
    assert await leases.live_holder("tick", now=1001.0) == "on-alpha"
    assert await leases.acquire("tick", "on-beta", 60, now=1001.0) == "on-alpha"
    assert await leases.acquire("tick", "on-beta", 60, now=1061.0) is None


async def test_a_released_named_lease_keeps_its_last_beat(leases: NamedLeases) -> None:
    assert await leases.last_beat("tick") is None
    await leases.acquire("tick", "a", 60, now=1000.0)
    await leases.acquire("tick", "a", 60, now=1015.0)
    await leases.release("tick", "a")
    assert await leases.holder("tick", now=1016.0) is None
    assert await leases.last_beat("tick") == 1015.0
    assert await leases.acquire("tick", "b", 60, now=1016.0) is None


async def test_concurrent_takers_of_a_free_name_get_one_holder(leases: NamedLeases) -> None:
    answers = await asyncio.gather(
        *(leases.acquire("tick", f"taker-{i}", 60, now=1000.0) for i in range(8))
    )
    winners = [i for i, holder in enumerate(answers) if holder is None]
    assert len(winners) == 1
    assert set(answers) - {None} == {f"taker-{winners[0]}"}


# -- retention -----------------------------------------------------------------------


async def test_retention_deletes_only_finished_jobs_older_than_the_limit(queue: JobQueue) -> None:
    for job_id in ("old-done", "old-failed", "new-done", "queued", "running"):
        await queue.enqueue(job_id, "k")
    finished = [("done", "old-done"), ("failed", "old-failed"), ("done", "new-done")]
    await queue.db.write(
        lambda conn: conn.executemany("UPDATE jobs SET status = ? WHERE id = ?", finished)
    )
    await queue.db.write(
        lambda conn: conn.execute(
            "UPDATE jobs SET updated_at = ? WHERE id IN ('old-done', 'old-failed', 'queued')",
            (time.time() - 10 * 86400,),
        )
    )
    await queue.db.write(
        lambda conn: conn.execute("UPDATE jobs SET status = 'running' WHERE id = 'running'")
    )
    assert await prune_jobs(queue, 7) == 2
    left = {job_id: await queue.get(job_id) for job_id in ("old-done", "new-done", "queued")}
    assert left["old-done"] is None and left["new-done"] is not None and left["queued"] is not None
