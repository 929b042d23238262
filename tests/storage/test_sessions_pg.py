"""Transcripts on PostgreSQL where behaviour is PostgreSQL's own: several nodes on one
database, and rows copied in by column name (`habakkuk storage migrate`)."""

from __future__ import annotations

import asyncio

from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.llm.types import Message
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.state import SCHEMA as STATE
from habakkuk.engine.storage import PostgresStorage


async def _node(storage: PostgresStorage) -> TranscriptStore:
    return await TranscriptStore.open_on(storage)


async def test_two_nodes_appending_to_one_session_never_take_the_same_seq(pg_url: str) -> None:
    storage = PostgresStorage(pg_url)
    control = await storage.open(CONTROL)
    state = await storage.open(STATE)
    first, second = await _node(storage), await _node(storage)
    try:
        await first.create_session("s", "main", "")
        appended = await asyncio.gather(
            *(
                (first if n % 2 else second).append("s", Message.user_text(f"message {n}"))
                for n in range(40)
            )
        )
        assert sorted(seq for seq in appended if seq is not None) == list(range(40))
        stored = await second.messages("s")
        assert [m.seq for m in stored] == list(range(40))
        # Each node finds what the other wrote.
        assert {h.seq for h in await first.search("message", limit=40)} == set(range(40))
    finally:
        for db in (first.db, second.db, state, control):
            await db.close()


async def test_words_copied_in_by_column_name_are_searchable(pg_url: str) -> None:
    storage = PostgresStorage(pg_url)
    control = await storage.open(CONTROL)
    state = await storage.open(STATE)
    store = await _node(storage)
    try:
        await store.create_session("s", "main", "")
        # As `storage migrate` copies a table: every SQLite column by name, the
        # indexing trigger kept out of it; the tsvector is generated from the text.
        await store.db.write(
            lambda conn: (
                conn.execute("SET LOCAL session_replication_role = replica"),
                conn.execute(
                    "INSERT INTO messages(id, session_id, seq, role, model, blocks, turn_id,"
                    " created_at) VALUES (7, 's', 0, 'user', '', ?, '', 1)",
                    ('[{"type":"text","text":"copied words"}]',),
                ),
                conn.execute(
                    "INSERT INTO message_text(message_id, session_id, seq, role, text)"
                    " VALUES (7, 's', 0, 'user', 'copied words')"
                ),
            )
        )
        [hit] = await store.search("copied")
        assert (hit.session, hit.seq, hit.snippet) == ("s", 0, "[copied] words")
    finally:
        for db in (store.db, state, control):
            await db.close()
