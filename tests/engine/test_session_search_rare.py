"""Session search of a rare word with common ones: checked on the rare word's messages
alone (an in-memory FTS5 index of their text), with the hits and the order of the walk
through every word's list on message_fts (SQLite; session_search.py)."""

from __future__ import annotations

import sqlite3
from typing import cast

import pytest

from habakkuk.engine import session_search
from habakkuk.engine.llm.types import Message, TextBlock
from habakkuk.engine.search_probe import probe_matches
from habakkuk.engine.session_search import SEARCH_WINDOW, SearchHit, search_messages
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.sql import Conn

RARE_TEXTS = [
    ("s", "a zephyr garden"),  # 0: the phrase
    ("s", "the garden of the zephyr wind"),  # 1: both words apart
    ("s", "Zéphyr-garden"),  # 2: the phrase, as unicode61 reads it
    ("s", "zephyr alone"),  # 3: no garden
    ("o", "zephyr garden"),  # o 0: the phrase, of another agent
    ("s", "a zephyr garden"),  # 4: as 0, newer
]


async def _home(store: TranscriptStore, common: int) -> None:
    await store.create_session("s", "main", "")
    await store.create_session("o", "ops", "")
    for number in range(common):
        await store.append("s", Message.user_text(f"garden tomato {number}"))
    for session, text in RARE_TEXTS:
        await store.append(session, Message("user", [TextBlock(text)]))
        await store.append("s", Message.user_text("garden tomato between"))


def _seqs(hits: list[SearchHit]) -> list[tuple[str, int]]:
    return [(hit.session, hit.seq) for hit in hits]


async def _both(
    store: TranscriptStore,
    query: str,
    *,
    agent: str | None = None,
    limit: int = 20,
    window: int = SEARCH_WINDOW,
) -> list[SearchHit]:
    """The hits checked on the rare word's messages, asserted equal to the walk's."""

    def search(conn: Conn, rare: int) -> list[SearchHit]:
        return search_messages(conn, query, agent=agent, limit=limit, window=window, rare=rare)

    probed = await store.db.run(lambda conn: search(conn, session_search.RARE_MESSAGES))
    walked = await store.db.run(lambda conn: search(conn, 0))
    assert probed == walked, query
    return probed


async def test_a_rare_word_with_a_common_one_finds_the_walks_hits_in_its_order(
    store: TranscriptStore,
) -> None:
    await _home(store, common=30)
    first = 30  # the seq of the first planted message in "s" (one between each)
    zero, two, four = first, first + 4, first + 9
    # The phrase first (diacritics and the hyphen as FTS5 reads them), then the
    # shorter, then the newest; a message without "garden" is no hit.
    expected = [("o", 0), ("s", two), ("s", four), ("s", zero), ("s", first + 2)]
    assert _seqs(await _both(store, "zephyr garden")) == expected
    # "garden zephyr" is found as one phrase in none: the shorter, then the newest.
    assert _seqs(await _both(store, "GARDEN zephyr")) == expected
    assert _seqs(await _both(store, '"zephyr garden"')) == expected[:4]
    assert _seqs(await _both(store, "zephyr garden", agent="ops")) == [("o", 0)]
    assert _seqs(await _both(store, "zephyr garden", limit=2)) == expected[:2]
    # A word without a token is no term (FTS5 ignores it); a word found nowhere, no hit.
    assert _seqs(await _both(store, "zephyr garden --")) == expected
    assert await _both(store, "zephyr garden nowhere") == []
    # A window smaller than the rare word's messages: the walk's window.
    assert _seqs(await _both(store, "zephyr garden", window=2)) == [("o", 0), ("s", four)]


async def test_rare_messages_too_long_to_index_are_left_to_the_walk(
    store: TranscriptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _home(store, common=3)
    monkeypatch.setattr(session_search, "RARE_CHARS", 20)
    assert len(await _both(store, "zephyr garden")) == 5


@pytest.mark.parametrize(
    "query",
    [
        '"cafe"',
        '"strasse"',
        '"straße"',
        '"fi"',
        '"ﬁle"',
        '"東京"',
        '"snake_case"',
        '"snake" "case"',
        '"3" "14"',
        '"well known"',
        '"ÉCOLE"',
    ],
)
async def test_the_probe_reads_text_as_message_fts_does(store: TranscriptStore, query: str) -> None:
    texts = ["Café au lait", "Straße", "strasse", "ﬁle", "東京 tokyo", "snake_case", "3.14"]
    texts += ["well-known", "école"]
    await store.create_session("s", "main", "")
    for text in texts:
        await store.append("s", Message.user_text(text))

    def indexed(conn: Conn) -> tuple[set[int], list[tuple[int, str]]]:
        sql = "SELECT rowid FROM message_fts WHERE message_fts MATCH ?"
        rows = conn.execute("SELECT message_id, text FROM message_text").fetchall()
        return {int(r[0]) for r in conn.execute(sql, (query,))}, [(r[0], r[1]) for r in rows]

    found, rows = await store.db.run(indexed)
    assert probe_matches(rows, [query]) == [found]


async def test_a_rare_word_with_a_common_one_walks_neither_list_with_the_other(
    store: TranscriptStore,
) -> None:
    await _home(store, common=30)
    statements: list[str] = []

    def search(conn: Conn) -> list[SearchHit]:
        sqlite = cast(sqlite3.Connection, conn)  # the store is SQLite here
        sqlite.set_trace_callback(statements.append)  # the SQL with its values
        try:
            return search_messages(conn, "zephyr garden")
        finally:
            sqlite.set_trace_callback(None)

    assert len(await store.db.run(search)) == 5
    on_index = [sql for sql in statements if "message_fts MATCH" in sql]
    # Each word's first messages alone, a few rows at most; neither the words together
    # nor the phrase on message_fts (a page of "garden" for each "zephyr").
    assert on_index and all(sql.endswith("LIMIT 101") for sql in on_index), on_index
    assert not [sql for sql in on_index if "zephyr" in sql and "garden" in sql]
