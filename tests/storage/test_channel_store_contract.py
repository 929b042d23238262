"""The channel tables (channels/store.py) behave the same on SQLite and PostgreSQL: health,
leases, offsets, seen keys, who may talk, pairing, bindings, delivery progress, prompts,
drafts and the reply sweep's place, through one suite run on both engines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from habakkuk.channels import store as channel_store
from habakkuk.channels.deliveries import reply_id
from habakkuk.channels.store import Activity, ChannelStore, Prompt, SweepMark
from habakkuk.channels.sweep import ReplySweep
from habakkuk.engine.errors import LeaseLost
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.sql import Database
from habakkuk.engine.storage import Storage

# The engines whose control database has the jobs table: PostgreSQL's comes with the
# queue's port (jobs.PG_MIGRATIONS); until then the tests that run jobs run on SQLite.
WITH_JOBS = pytest.mark.parametrize(
    "storage", ["sqlite", "postgres"] if CONTROL.postgres else ["sqlite"], indirect=True
)


@pytest.fixture
async def control(storage: Storage) -> AsyncIterator[Database]:
    db = await storage.open(CONTROL, inline=True)
    try:
        yield db
    finally:
        await db.close()


@pytest.fixture
async def store(control: Database) -> ChannelStore:
    return await ChannelStore.open(control)


async def test_opening_twice_keeps_the_tables_and_their_rows(control: Database) -> None:
    first = await ChannelStore.open(control)
    await first.save_offset("tg", "41")
    again = await ChannelStore.open(control)
    assert await again.offset("tg") == "41"


async def test_two_stores_creating_the_tables_at_once_both_succeed(storage: Storage) -> None:
    one, two = await storage.open(CONTROL), await storage.open(CONTROL)
    try:
        await asyncio.gather(ChannelStore.open(one), ChannelStore.open(two))
        assert await (ChannelStore(two)).offset("none") is None
    finally:
        await one.close()
        await two.close()


async def test_status_keeps_since_until_the_state_changes_and_counts_restarts(
    store: ChannelStore,
) -> None:
    await store.set_status("tg", "telegram", "connecting", holder="h:1")
    first = (await store.statuses())["tg"]
    await store.set_status("tg", "telegram", "connecting", detail="again", restarted=True)
    same = (await store.statuses())["tg"]
    assert same.since == first.since and same.restarts == 1 and same.detail == "again"
    await store.set_status("tg", "telegram", "connected")
    changed = (await store.statuses())["tg"]
    assert changed.state == "connected" and changed.since >= first.since
    assert changed.restarts == 1 and changed.last_beat is None
    await store.beat("tg", 1234.5)
    beaten = (await store.statuses())["tg"]
    assert beaten.last_beat == 1234.5 and isinstance(beaten.restarts, int)


async def test_a_lease_is_held_by_one_owner_until_released(store: ChannelStore) -> None:
    assert await store.acquire_lease("channel:tg", "a:1:x", 30) is None
    assert await store.acquire_lease("channel:tg", "b:2:y", 30) == "a:1:x"
    assert await store.lease_holder("channel:tg") == "a:1:x"
    await store.release_lease("channel:tg", "b:2:y")  # not b's to release
    assert await store.lease_holder("channel:tg") == "a:1:x"
    await store.release_lease("channel:tg", "a:1:x")
    assert await store.lease_holder("channel:tg") is None
    assert await store.acquire_lease("channel:tg", "b:2:y", 30) is None


async def test_offsets_and_the_sweep_mark_are_upserted_and_the_mark_only_moves_on(
    store: ChannelStore,
) -> None:
    assert await store.offset("tg") is None
    await store.save_offset("tg", "10")
    await store.save_offset("tg", "11")
    assert await store.offset("tg") == "11"
    assert await store.sweep_mark("turn") is None
    await store.save_sweep_mark("turn", SweepMark(100.5, 7))
    await store.save_sweep_mark("turn", SweepMark(100.5, 3))  # behind: kept where it was
    assert await store.sweep_mark("turn") == SweepMark(100.5, 7)
    await store.save_sweep_mark("turn", SweepMark(101.0, 1))
    assert await store.sweep_mark("turn") == SweepMark(101.0, 1)


async def test_a_seen_key_is_remembered_for_a_week_then_pruned(
    store: ChannelStore, control: Database
) -> None:
    old = time.time() - channel_store.SEEN_KEEP_SECONDS - 60
    await control.write(
        lambda conn: conn.execute(
            "INSERT INTO channel_seen(account, key, at) VALUES ('tg', 'old', ?)", (old,)
        )
    )
    assert not await store.seen("tg", "m1")
    await store.mark_seen("tg", "m1")
    await store.mark_seen("tg", "m1")  # a redelivery: still one key, no error
    assert await store.seen("tg", "m1") and not await store.seen("web", "m1")
    assert not await store.seen("tg", "old")


async def test_a_pairing_code_is_reused_then_approved_once_and_lets_the_user_in(
    store: ChannelStore,
) -> None:
    assert await store.allowed_user("tg", "42") is None
    pairing = await store.pairing_for("tg", "42", "Ann", "tg:42")
    assert len(pairing.code) == 8 and pairing.expires > time.time()
    assert (await store.pairing_for("tg", "42", "Ann", "tg:42")).code == pairing.code
    # Another user of the same account is a different person (the column is "user").
    assert (await store.pairing_for("tg", "43", "Bob", "tg:43")).code != pairing.code
    approved = await store.approve_pairing(pairing.code.lower())
    assert approved is not None and (approved.user, approved.name) == ("42", "Ann")
    assert await store.allowed_user("tg", "42") == "paired"
    assert await store.allowed_user("tg", "43") is None
    assert await store.approve_pairing(pairing.code) is None  # used up


async def test_an_expired_pairing_code_is_refused(store: ChannelStore, control: Database) -> None:
    pairing = await store.pairing_for("tg", "42", "Ann", "tg:42")
    await control.write(
        lambda conn: conn.execute("UPDATE channel_pairing SET expires = ?", (time.time() - 1,))
    )
    assert await store.approve_pairing(pairing.code) is None
    assert (await store.pairing_for("tg", "42", "Ann", "tg:42")).code != pairing.code


async def test_a_binding_points_a_conversation_at_a_session_and_keeps_its_override(
    store: ChannelStore,
) -> None:
    assert await store.binding("tg:42") is None
    await store.bind("tg:42", "s1", agent_override="coder")
    await store.bind("tg:42", "s2")
    binding = await store.binding("tg:42")
    assert binding is not None and (binding.session, binding.agent_override) == ("s2", "coder")
    await store.bind("tg:43", "s2", agent_override="")
    await store.touch("tg:43")
    assert await store.conversation_of("s2") == "tg:43"  # the newest binding
    assert await store.conversation_of("nope") is None


async def test_drafts_are_saved_replaced_and_dropped(store: ChannelStore) -> None:
    assert await store.draft("t1") is None
    await store.save_draft("t1", "tg:42", "100")
    await store.save_draft("t1", "tg:42", "101")
    assert await store.draft("t1") == ("tg:42", "101")
    await store.drop_draft("t1")
    assert await store.draft("t1") is None


def _prompt(turn: str, *, id: str = "p1", nonce: str = "n1", created: float = 0.0) -> Prompt:
    return Prompt(
        id=id,
        kind="approval",
        conversation="tg:42",
        turn=turn,
        nonce=nonce,
        choices=["allow_once", "deny"],
        answer=None,
        by="",
        created=created or time.time(),
        tool="terminal",
        summary="rm -rf build",
        agent="main",
        session="s1",
    )


async def test_a_prompt_is_answered_once_by_its_nonce(store: ChannelStore) -> None:
    await store.open_prompt(_prompt("turn:1"))
    found = await store.prompt_by_nonce("n1")
    assert found is not None and found.choices == ["allow_once", "deny"]
    assert found.tool == "terminal" and found.summary == "rm -rf build"
    assert await store.answer_prompt("p1", "deny", "Ann")
    assert not await store.answer_prompt("p1", "allow_once", "Bob")  # the first answer wins
    assert await store.prompt_answer("p1") == ("deny", "Ann")
    assert await store.prompt_by_nonce("n1") is None
    # Opened again (a resumed turn asks again): a fresh, unanswered prompt.
    await store.open_prompt(_prompt("turn:1", nonce="n2"))
    assert await store.prompt_answer("p1") is None
    assert await store.prompt_by_nonce("n2") is not None
    # A new prompt reusing a nonce takes it over, as INSERT OR REPLACE did.
    await store.open_prompt(_prompt("turn:2", id="p2", nonce="n2"))
    taken = await store.prompt_by_nonce("n2")
    assert taken is not None and taken.id == "p2"
    await store.close_prompt("p2")
    assert await store.prompt_by_nonce("n2") is None


@WITH_JOBS
async def test_only_prompts_of_running_turns_are_waiting(
    storage: Storage, store: ChannelStore, control: Database
) -> None:
    queue = JobQueue(control)
    await queue.enqueue("turn:run", "turn", {"session": "s1"})
    await queue.enqueue("turn:done", "turn", {"session": "s1"})
    running = await queue.claim(["turn"])
    finished = await queue.claim(["turn"])
    assert running is not None and finished is not None
    await queue.complete(finished, {})
    await store.open_prompt(_prompt(running.job.id, id="p-run", nonce="a"))
    await store.open_prompt(_prompt(finished.job.id, id="p-done", nonce="b"))
    old = time.time() - channel_store.PROMPT_SECONDS - 5
    await store.open_prompt(_prompt(running.job.id, id="p-old", nonce="c", created=old))
    assert [p.id for p in await store.waiting_approvals()] == ["p-run"]
    waiting = await store.waiting_prompt("tg:42")
    assert waiting is not None and waiting.id == "p-run"
    assert not await store.answer_waiting_approval("p-done", "deny", "dashboard")
    assert await store.answer_waiting_approval("p-run", "allow_once", "dashboard")
    assert not await store.answer_waiting_approval("p-run", "deny", "terminal")
    assert await store.prompt_answer("p-run") == ("allow_once", "dashboard")
    assert await store.waiting_approvals() == []


@WITH_JOBS
async def test_a_chunk_is_recorded_only_while_the_delivery_is_ours(
    storage: Storage, store: ChannelStore, control: Database
) -> None:
    queue = JobQueue(control)
    await queue.enqueue("delivery:1", "delivery:tg", {"to": "tg:42"})
    lease = await queue.claim(["delivery:tg"])
    assert lease is not None
    await store.record_chunk(lease, 0, "m0")
    await store.record_chunk(lease, 1, "m1")
    await store.record_chunk(lease, 1, "m1b")  # sent again after a crash: replaced
    assert await store.sent_chunks("delivery:1") == {0: "m0", 1: "m1b"}
    await queue.complete(lease, {})
    with pytest.raises(LeaseLost):
        await store.record_chunk(lease, 2, "m2")
    assert await store.sent_chunks("delivery:1") == {0: "m0", 1: "m1b"}


@WITH_JOBS
async def test_the_start_of_a_send_is_kept_per_owner_from_its_first_time_and_fenced(
    storage: Storage, store: ChannelStore, control: Database
) -> None:
    queue = JobQueue(control)
    await queue.enqueue("delivery:1", "delivery:tg", {"to": "tg:42"})
    lease = await queue.claim(["delivery:tg"])
    assert lease is not None
    assert await store.attempted_chunks("delivery:1") == {}
    await store.start_chunk(lease, 0)
    first = (await store.attempted_chunks("delivery:1"))[0]
    await store.record_chunk(lease, 0, "m0", then=1)  # chunk 1 starts in the same trip
    await store.start_chunk(lease, 0)  # a retry of the same chunk keeps the first time
    attempted = await store.attempted_chunks("delivery:1")
    assert attempted[0] == first and attempted[1] >= first and set(attempted) == {0, 1}
    assert await store.sent_chunks("delivery:1") == {0: "m0"}
    # Resumed: chunk 0 sent, chunk 1 started and unrecorded; chunk 1 is noted again now.
    progress = await store.begin_send(lease, range(3))
    assert progress.sent == {0: "m0"} and progress.attempted == attempted
    assert progress.started == 1
    await queue.complete(lease, {})
    with pytest.raises(LeaseLost):  # not ours any more: nothing is sent
        await store.start_chunk(lease, 2)
    with pytest.raises(LeaseLost):
        await store.begin_send(lease, range(3))
    assert set(await store.attempted_chunks("delivery:1")) == {0, 1}


@WITH_JOBS
async def test_the_reply_sweep_queues_each_missing_reply_once_and_keeps_its_place(
    storage: Storage, store: ChannelStore, control: Database
) -> None:
    queue = JobQueue(control)
    await queue.enqueue("turn:tg:42:7", "turn", {"session": "s", "reply_to": {"to": "tg:42"}})
    await queue.enqueue("turn:cli", "turn", {"session": "s"})
    for _ in range(2):
        lease = await queue.claim(["turn"])
        assert lease is not None
        await queue.complete(lease, {"reply": "hi"})
    sweep = ReplySweep(queue, "turn", store, batch=1)
    first = await sweep.run()
    assert first.queued == 1 and first.read == 2
    assert (await ReplySweep(queue, "turn", store).run()).queued == 0  # a restart: same place
    job = await queue.get(reply_id("turn:tg:42:7"))
    assert job is not None and job.kind == "delivery:tg"
    assert await store.sweep_mark("turn") is not None


async def test_a_user_column_is_a_column_not_the_servers_user(
    store: ChannelStore, control: Database
) -> None:
    # PostgreSQL reads a bare `user` as CURRENT_USER: every statement quotes it.
    await store.pairing_for("tg", "postgres", "P", "tg:1")
    rows = await control.fetchall('SELECT "user" FROM channel_pairing')
    assert [row[0] for row in rows] == ["postgres"]
    assert await store.allowed_user("tg", "postgres") is None


async def test_two_nodes_answering_one_prompt_at_once_record_one_answer(
    storage: Storage, store: ChannelStore
) -> None:
    await store.open_prompt(_prompt("turn:1"))
    other_db = await storage.open(CONTROL)
    try:
        other = ChannelStore(other_db)
        answers = await asyncio.gather(
            *(
                (store if n % 2 else other).answer_prompt("p1", f"answer-{n}", f"node-{n % 2}")
                for n in range(8)
            )
        )
        assert sum(answers) == 1
        winner = answers.index(True)
        assert await other.prompt_answer("p1") == (f"answer-{winner}", f"node-{winner % 2}")
    finally:
        await other_db.close()


async def test_two_nodes_asking_for_one_users_pairing_at_once_get_one_code(
    storage: Storage, store: ChannelStore
) -> None:
    other_db = await storage.open(CONTROL)
    try:
        other = ChannelStore(other_db)
        pairings = await asyncio.gather(
            *((store if n % 2 else other).pairing_for("tg", "42", "Ann", "tg:42") for n in range(6))
        )
        assert len({pairing.code for pairing in pairings}) == 1
    finally:
        await other_db.close()


async def test_an_older_prompts_table_gains_the_columns_added_since(control: Database) -> None:
    # As the first release left it: no tool, summary, reason, agent or session.
    await control.write(
        lambda conn: conn.execute(
            "CREATE TABLE channel_prompts (id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
            " conversation TEXT NOT NULL, turn TEXT NOT NULL, nonce TEXT NOT NULL UNIQUE,"
            " choices TEXT NOT NULL DEFAULT '[]', answer TEXT, by TEXT NOT NULL DEFAULT '',"
            " created DOUBLE PRECISION NOT NULL)"
        )
    )
    store = await ChannelStore.open(control)
    await ChannelStore.open(control)  # a second start adds nothing twice
    await store.open_prompt(_prompt("turn:1"))
    found = await store.prompt_by_nonce("n1")
    assert found is not None and (found.tool, found.agent, found.session) == (
        "terminal",
        "main",
        "s1",
    )


async def test_an_older_status_table_gains_the_activity_columns_with_full_precision(
    control: Database,
) -> None:
    # As the first release left it: no last message in or out, no last error.
    await control.write(
        lambda conn: conn.execute(
            "CREATE TABLE channel_status (account TEXT PRIMARY KEY, type TEXT NOT NULL,"
            " state TEXT NOT NULL, holder TEXT NOT NULL DEFAULT '',"
            " detail TEXT NOT NULL DEFAULT '', since DOUBLE PRECISION NOT NULL,"
            " last_beat DOUBLE PRECISION, restarts BIGINT NOT NULL DEFAULT 0,"
            " updated_at DOUBLE PRECISION NOT NULL)"
        )
    )
    await control.write(
        lambda conn: conn.execute(
            "INSERT INTO channel_status(account, type, state, since, updated_at)"
            " VALUES ('tg', 'telegram', 'connected', 1, 1)"
        )
    )
    store = await ChannelStore.open(control)
    await ChannelStore.open(control)  # a second start adds nothing twice
    old = (await store.statuses())["tg"]
    assert (old.last_in, old.last_out, old.last_error, old.last_error_at) == (None, None, "", None)
    at = 1_765_000_000.123  # an epoch time to the millisecond: a 4-byte float would round it
    await store.record("tg", Activity(last_in=at, last_out=at + 1))
    found = (await store.statuses())["tg"]
    assert (found.last_in, found.last_out) == (at, at + 1)


async def test_the_last_error_stays_until_a_newer_one_replaces_it(store: ChannelStore) -> None:
    await store.set_status("tg", "telegram", "backoff", error="getUpdates: 502 Bad Gateway")
    first = (await store.statuses())["tg"]
    assert first.last_error == "getUpdates: 502 Bad Gateway" and first.last_error_at is not None
    # A state without an error, activity without one: the error and its time stay.
    await store.set_status("tg", "telegram", "connected")
    await store.record("tg", Activity(beat=5.0, last_in=6.0))
    kept = (await store.statuses())["tg"]
    assert (kept.last_error, kept.last_error_at) == (first.last_error, first.last_error_at)
    assert (kept.last_beat, kept.last_in, kept.last_out) == (5.0, 6.0, None)
    await store.record("tg", Activity(last_out=7.0, error="sendMessage: 403", error_at=8.0))
    newer = (await store.statuses())["tg"]
    assert (newer.last_error, newer.last_error_at) == ("sendMessage: 403", 8.0)
    assert (newer.last_beat, newer.last_in, newer.last_out) == (5.0, 6.0, 7.0)
