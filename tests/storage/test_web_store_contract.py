"""The web chat's store (server/webstore.py) behaves the same on SQLite and PostgreSQL:
conversations, the message log and its files, the /v1 bookkeeping and retention."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from habakkuk.channels.web import ChatFile
from habakkuk.engine.storage import PostgresStorage, Storage
from habakkuk.server.webstore import WAKE_CHANNEL, WebStore
from tests.helpers import eventually


@pytest.fixture
async def web(storage: Storage) -> AsyncIterator[WebStore]:
    store = await WebStore.open_on(storage)
    try:
        yield store
    finally:
        await store.close()


async def test_appends_are_idempotent_and_sequence_numbers_only_grow(web: WebStore) -> None:
    await web.bind("c", "main", "ses_1")
    first, created = await web.append("c", "user", "hi", dedupe="in:c:1", turn="t1")
    again, created_again = await web.append("c", "user", "hi", dedupe="in:c:1", turn="t1")
    assert created and not created_again and again.seq == first.seq
    second, _ = await web.append("other", "user", "x")
    third, _ = await web.append("c", "assistant", "hello", turn="t1")
    assert first.seq < second.seq < third.seq
    assert [e.seq for e in await web.events("c")] == [first.seq, third.seq]
    assert [e.seq for e in await web.events("c", after=first.seq)] == [third.seq]
    last = await web.last_event("c")
    assert last is not None and last.text == "hello" and last.turn == "t1"
    assert await web.first_user_text("c") == "hi"
    found = await web.find("in:c:1")
    assert found is not None and found.seq == first.seq


async def test_concurrent_appends_with_one_dedupe_key_add_one_message(web: WebStore) -> None:
    outcomes = await asyncio.gather(
        *(web.append("c", "user", "hi", dedupe="in:c:9") for _ in range(8))
    )
    assert sum(created for _, created in outcomes) == 1
    assert len({event.seq for event, _ in outcomes}) == 1
    assert len(await web.events("c")) == 1


async def test_an_approval_notice_names_its_approval(web: WebStore) -> None:
    event, _ = await web.append("c", "notice", "Approval needed", dedupe="approval:apr_1:c")
    assert event.approval == "apr_1"
    assert event.to_json()["approval"] == "apr_1"


async def test_a_file_is_found_only_in_its_own_conversation(web: WebStore) -> None:
    chat_file = ChatFile("f_1", "plot.png", 1234, "image/png", "/blobs/ab/abc.png")
    event, _ = await web.append("c", "file", "", file=chat_file, turn="t1")
    assert event.file == chat_file
    assert await web.file("c", "f_1") == chat_file
    assert await web.file("other", "f_1") is None
    assert await web.file("c", "") is None
    (listed,) = await web.events("c")
    assert listed.file is not None and listed.file.size == 1234


async def test_conversations_are_bound_listed_newest_first_and_found_by_session(
    web: WebStore,
) -> None:
    await web.bind("a", "main", "ses_1")
    await web.bind("b", "coder", "ses_2")
    bound = await web.bind("a", "main", "ses_3")
    assert (bound.agent, bound.session) == ("main", "ses_3")
    assert [c.conversation for c in await web.conversations()] == ["a", "b"]
    await web.append("b", "user", "later")  # a message makes it the most recent
    assert [c.conversation for c in await web.conversations()] == ["b", "a"]
    assert await web.conversations_of("ses_3") == ["a"]
    assert await web.conversations_of("ses_1") == []
    got = await web.conversation("b")
    assert got is not None and got.agent == "coder"


async def test_api_users_keys_and_responses_are_remembered_first_writer_wins(
    web: WebStore,
) -> None:
    assert await web.user_session("postgres", "main") is None
    await web.remember_user("postgres", "main", "ses_1")
    await web.remember_user("postgres", "main", "ses_2")
    await web.remember_user("ann", "main", "ses_9")
    assert await web.user_session("postgres", "main") == "ses_2"
    assert await web.user_session("postgres", "coder") is None
    assert await web.remember_api_key("k1", "ses_1", "t1") == ("ses_1", "t1")
    assert await web.remember_api_key("k1", "ses_2", "t2") == ("ses_1", "t1")
    assert await web.api_key("k1") == ("ses_1", "t1")
    await web.remember_response("resp_1", "ses_1", "main")
    await web.remember_response("resp_1", "ses_2", "coder")
    assert await web.response("resp_1") == ("ses_1", "main")


async def test_retention_drops_old_keys_first_and_old_messages_later(web: WebStore) -> None:
    await web.bind("c", "main", "ses_1")
    await web.append("c", "user", "hi", turn="t1")
    await web.remember_api_key("key", "ses_1", "t1")
    await web.remember_response("resp_1", "ses_1", "main")
    now = time.time()
    await web.prune(now + 8 * 86400)
    assert await web.api_key("key") is None
    assert len(await web.events("c")) == 1
    assert await web.response("resp_1") == ("ses_1", "main")
    await web.prune(now + 200 * 86400)
    assert await web.events("c") == []
    assert await web.response("resp_1") is None
    assert await web.conversation("c") is None


async def test_an_append_on_postgresql_notifies_every_nodes_streams(pg_url: str) -> None:
    import psycopg

    web = await WebStore.open_on(PostgresStorage(pg_url))

    def connect() -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(pg_url, autocommit=True)

    listener = await asyncio.to_thread(connect)
    try:
        await asyncio.to_thread(listener.execute, f"LISTEN {WAKE_CHANNEL}")
        await web.append("conv-1", "assistant", "a reply another node delivered")
        await web.append("conv-1", "assistant", "again", dedupe="d1")
        await web.append("conv-1", "assistant", "again", dedupe="d1")  # nothing new: silent

        def heard() -> list[str]:
            return [note.payload for note in listener.notifies(timeout=5, stop_after=2)]

        assert await asyncio.to_thread(heard) == ["conv-1", "conv-1"]
        assert [n.payload for n in await asyncio.to_thread(listener.notifies, timeout=0.2)] == []
    finally:
        await asyncio.to_thread(listener.close)
        await web.close()


async def test_a_stream_on_one_node_is_woken_by_an_append_on_another(pg_url: str) -> None:
    here = await WebStore.open_on(PostgresStorage(pg_url))
    there = await WebStore.open_on(PostgresStorage(pg_url))
    try:

        async def listening() -> bool:
            return here.hears_other_nodes()

        await eventually(listening, what="the node's LISTEN", timeout=10)
        with here.watch("conv-1") as woken, here.watch("conv-2") as other:
            await there.append("conv-1", "assistant", "delivered by the other node")
            await asyncio.wait_for(woken.wait(), 10)
            assert not other.is_set()
        assert [e.text for e in await here.events("conv-1")] == ["delivered by the other node"]
    finally:
        await there.close()
        await here.close()
    assert not here.hears_other_nodes()


async def test_a2a_tasks_keep_the_first_record_and_list_newest_first(web: WebStore) -> None:
    from habakkuk.server import a2a_store
    from habakkuk.server.a2a_store import A2ATask

    first = A2ATask("turn_1", "ses_a", "main", "m-1", "one", 100.0)
    won = await asyncio.gather(
        *(a2a_store.remember_task(web.db, first, new_context=True) for _ in range(4))
    )
    assert {w.task for w in won} == {"turn_1"}
    again = A2ATask("turn_1", "ses_other", "main", "m-1", "changed", 101.0)
    assert (await a2a_store.remember_task(web.db, again)).text == "one"
    await a2a_store.remember_task(web.db, A2ATask("turn_2", "ses_a", "main", "m-2", "two", 200.0))
    assert await a2a_store.context_agent(web.db, "ses_a") == "main"
    assert await a2a_store.context_agent(web.db, "ses_chat") is None
    listed = await a2a_store.recent_tasks(web.db, "ses_a", 10)
    assert [t.task for t in listed] == ["turn_2", "turn_1"]
    await a2a_store.prune(web.db, 150.0)
    assert await a2a_store.task(web.db, "turn_1") is None
    assert await a2a_store.task(web.db, "turn_2") is not None
