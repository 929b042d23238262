"""Semantic search over an agent's memory.db against the fake embeddings server.

The database holds the index's tables as knowledge/index.py lays them out (the columns
semantic search reads); FTS ranks with the spec's bm25 weights.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine.config import ProviderConfig
from habakkuk.engine.store import Migration, SqliteDatabase, transaction
from habakkuk.knowledge.embeddings import PAUSE_SECONDS, Embedder
from habakkuk.knowledge.index import content_hash, embedded_text
from habakkuk.knowledge.memory_types import MemoryHit, NoteSummary
from habakkuk.knowledge.semantic import SemanticIndex
from habakkuk.knowledge.vectors import EMBEDDINGS_SCHEMA
from tests.fakes.model_server import Fail, FakeModelServer

SCHEMA = [
    Migration(
        1,
        """
        CREATE TABLE notes(
            id INTEGER PRIMARY KEY, slug TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
            tags TEXT NOT NULL, created TEXT NOT NULL, updated TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '', session TEXT NOT NULL DEFAULT '',
            trust TEXT NOT NULL DEFAULT 'trusted', text_hash TEXT NOT NULL,
            size INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE note_tags(note_id INTEGER NOT NULL, tag TEXT NOT NULL);
        CREATE VIRTUAL TABLE notes_fts USING fts5(title, tags, body,
            tokenize = 'porter unicode61');
        """
        + EMBEDDINGS_SCHEMA,
    )
]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Memory:
    """Just enough of an agent's index to write notes and search them by words."""

    def __init__(self, db: SqliteDatabase):
        self.db = db

    async def put(self, slug: str, title: str, body: str, tags: tuple[str, ...] = ()) -> None:
        digest = content_hash(embedded_text(title, tags, body))

        def _put(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                row = conn.execute("SELECT id FROM notes WHERE slug = ?", (slug,)).fetchone()
                if row is not None:
                    conn.execute("DELETE FROM notes WHERE id = ?", (row[0],))
                    conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (row[0],))
                    conn.execute("DELETE FROM note_tags WHERE note_id = ?", (row[0],))
                cur = conn.execute(
                    "INSERT INTO notes (slug, title, tags, created, updated, text_hash)"
                    " VALUES (?, ?, ?, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', ?)",
                    (slug, title, json.dumps(list(tags)), digest),
                )
                conn.execute(
                    "INSERT INTO notes_fts (rowid, title, tags, body) VALUES (?, ?, ?, ?)",
                    (cur.lastrowid, title, " ".join(tags), body),
                )
                for tag in tags:
                    conn.execute("INSERT INTO note_tags VALUES (?, ?)", (cur.lastrowid, tag))

        await self.db.run(_put)

    async def fts(self, query: str, limit: int) -> list[MemoryHit]:
        match = " OR ".join(f'"{w}"' for w in query.split())

        def _search(conn: sqlite3.Connection) -> list[MemoryHit]:
            rows = conn.execute(
                "SELECT n.slug, n.title, bm25(notes_fts, 10.0, 5.0, 1.0) AS rank,"
                " snippet(notes_fts, -1, '[', ']', '…', 16) AS snip"
                " FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid"
                " WHERE notes_fts MATCH ? ORDER BY rank LIMIT ?",
                (match, limit),
            ).fetchall()
            return [
                MemoryHit(NoteSummary(r[0], r[1], (), "", ""), r[3], -float(r[2])) for r in rows
            ]

        return await self.db.run(_search)


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = await SqliteDatabase.open(tmp_path / "memory.db", SCHEMA)
    yield database
    await database.close()


def semantic_for(
    server: FakeModelServer, db: SqliteDatabase, model: str, clock: Clock
) -> SemanticIndex:
    provider = ProviderConfig(type="openai", base_url=f"{server.base_url}/v1")
    provider.name = "local"
    return SemanticIndex(db, Embedder(provider, model, lambda: "k", clock=clock))


async def seed(memory: Memory) -> None:
    await memory.put("commute", "Commute", "Takes the automobile to the office every day.")
    await memory.put("coffee", "Coffee preference", "Flat white with oat milk, no sugar.")
    await memory.put("garden", "Garden", "Roses and tulips along the fence.")


async def test_a_note_found_only_by_meaning_ranks(
    server: FakeModelServer, db: SqliteDatabase
) -> None:
    server.same_meaning("car", "automobile")
    memory = Memory(db)
    await seed(memory)
    semantic = semantic_for(server, db, "embed-fake", Clock())
    try:
        assert await semantic.embed_pending() == 3
        query = "car"
        assert await memory.fts(query, 10) == []  # no shared word, even stemmed
        hits = await semantic.search(query, (), 5, lambda n: memory.fts(query, n))
        assert [h.note.slug for h in hits][:1] == ["commute"]
        assert hits[0].snippet.startswith("Takes the automobile")
        assert hits[0].note.title == "Commute"
        # Unrelated notes stay under the 0.25 floor.
        assert "garden" not in [h.note.slug for h in hits]
    finally:
        await semantic.close()


async def test_fts_hits_keep_their_snippets_and_are_fused_with_meaning(
    server: FakeModelServer, db: SqliteDatabase
) -> None:
    server.same_meaning("car", "automobile")
    memory = Memory(db)
    await seed(memory)
    await memory.put("parking", "Parking", "The car park opens at seven.")
    semantic = semantic_for(server, db, "embed-fake", Clock())
    try:
        await semantic.embed_pending()
        hits = await semantic.search("car", (), 5, lambda n: memory.fts("car", n))
        slugs = [h.note.slug for h in hits]
        assert slugs[0] == "parking" and "commute" in slugs
        assert "[car]" in hits[0].snippet
        # FTS was asked three times deeper than the limit.
        deep: list[int] = []

        async def counting(n: int) -> list[MemoryHit]:
            deep.append(n)
            return await memory.fts("car", n)

        await semantic.search("car", (), 4, counting)
        assert deep == [12]
    finally:
        await semantic.close()


async def test_an_embedding_failure_pauses_and_search_returns_the_fts_results(
    server: FakeModelServer, db: SqliteDatabase
) -> None:
    memory = Memory(db)
    await seed(memory)
    clock = Clock()
    semantic = semantic_for(server, db, "embed-fake", clock)
    try:
        server.fail_embeddings(Fail(429, "rate_limit"))
        assert await semantic.embed_pending() == 0
        assert semantic.embedder.paused
        sent = len(server.embedding_requests)
        hits = await semantic.search("coffee", (), 5, lambda n: memory.fts("coffee", n))
        assert [h.note.slug for h in hits] == ["coffee"]
        assert "[Coffee]" in hits[0].snippet
        assert len(server.embedding_requests) == sent  # paused: nothing sent
        # The query's own embedding failing also falls back to FTS, never empty.
        clock.now += PAUSE_SECONDS
        server.fail_embeddings(Fail(500))
        hits = await semantic.search("coffee", (), 5, lambda n: memory.fts("coffee", n))
        assert [h.note.slug for h in hits] == ["coffee"]
        assert semantic.embedder.paused
        clock.now += PAUSE_SECONDS
        assert await semantic.embed_pending() == 3
    finally:
        await semantic.close()


async def test_unchanged_text_is_not_embedded_again(
    server: FakeModelServer, db: SqliteDatabase
) -> None:
    memory = Memory(db)
    await seed(memory)
    semantic = semantic_for(server, db, "embed-fake", Clock())
    try:
        assert await semantic.embed_pending() == 3
        sent = len(server.embedding_requests)
        # Reindexing the same text (a new row, the same hash) sends nothing.
        await memory.put("coffee", "Coffee preference", "Flat white with oat milk, no sugar.")
        assert await semantic.embed_pending() == 0
        assert len(server.embedding_requests) == sent
        # A changed note is embedded, alone.
        await memory.put("coffee", "Coffee preference", "Espresso now.")
        assert await semantic.embed_pending() == 1
        assert server.embedding_requests[-1].json["input"] == [
            embedded_text("Coffee preference", (), "Espresso now.")
        ]
    finally:
        await semantic.close()


async def test_switching_the_model_embeds_again_and_never_mixes_vectors(
    server: FakeModelServer, db: SqliteDatabase
) -> None:
    memory = Memory(db)
    await seed(memory)
    first = semantic_for(server, db, "embed-a", Clock())
    second = semantic_for(server, db, "embed-b", Clock())
    try:
        assert await first.embed_pending() == 3
        assert await second.embed_pending() == 3
        assert [r.json["model"] for r in server.embedding_requests] == ["embed-a", "embed-b"]
        rows = await db.fetchall("SELECT model, count(*) FROM embeddings GROUP BY model")
        assert {r[0]: r[1] for r in rows} == {"embed-a": 3, "embed-b": 3}
    finally:
        await first.close()
        await second.close()


async def test_writes_are_embedded_in_the_background_and_coalesced(
    server: FakeModelServer, db: SqliteDatabase
) -> None:
    memory = Memory(db)
    semantic = semantic_for(server, db, "embed-fake", Clock())
    try:
        await memory.put("one", "One", "first note")
        semantic.schedule()
        await memory.put("two", "Two", "second note")
        semantic.schedule()  # a pass is running: it looks again when done
        await semantic.settle()
        rows = await db.fetchall("SELECT count(*) FROM embeddings")
        assert rows[0][0] == 2
        assert len(server.embedding_requests) <= 2
    finally:
        await semantic.close()


async def test_a_tag_filter_applies_to_the_semantic_side(
    server: FakeModelServer, db: SqliteDatabase
) -> None:
    server.same_meaning("car", "automobile")
    memory = Memory(db)
    await memory.put("commute", "Commute", "Takes the automobile to work.", ("travel",))
    await memory.put("rental", "Rental", "Rented an automobile in Rome.", ("holiday",))
    semantic = semantic_for(server, db, "embed-fake", Clock())
    try:
        await semantic.embed_pending()
        hits = await semantic.search("car", ("holiday",), 5, lambda n: memory.fts("car", n))
        assert [h.note.slug for h in hits] == ["rental"]
    finally:
        await semantic.close()
