"""The index follows the files: hand edits, no idle writes, rebuilds, ranking, hostile queries."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Awaitable, Callable

import pytest

from habakkuk.engine.home import Home
from habakkuk.knowledge.index import FTS_TABLES, MERGE_PAGES, merge_step, rank_window
from habakkuk.knowledge.service import Memory
from tests.helpers import sqlite_conn

from .conftest import AGENT


async def test_a_hand_edit_is_found_by_the_next_search_and_recorded_by_hand(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Bike", "A red bicycle.", provenance=AGENT)
    path = home.agent_dir("main") / "memory" / "bike.md"
    path.write_text(path.read_text().replace("A red bicycle.", "A green tandem."))
    hits = await memory.search("main", "tandem")
    assert [h.note.slug for h in hits] == ["bike"]
    assert "[tandem]" in hits[0].snippet
    assert await memory.search("main", "red") == []
    changes = await memory.history("main", name="bike")
    assert [(c.by, c.op) for c in changes] == [("hand", "updated"), ("agent", "created")]


async def test_a_note_added_or_deleted_by_hand_is_indexed_and_recorded(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "First", "one", provenance=AGENT)
    folder = home.agent_dir("main") / "memory"
    (folder / "by-hand.md").write_text("Written in vim.\n")
    assert [h.note.slug for h in await memory.search("main", "vim")] == ["by-hand"]
    (folder / "first.md").unlink()
    _, total = await memory.list_notes("main")
    assert total == 1
    ops = [(c.name, c.by, c.op) for c in await memory.history("main")]
    assert ops[:2] == [("first", "hand", "deleted"), ("by-hand", "hand", "created")]


async def test_a_search_when_nothing_changed_opens_no_write_transaction(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Stable", "Nothing moves here.", provenance=AGENT)
    await memory.search("main", "moves")
    db = await memory.database("main")
    statements: list[str] = []
    await db.run(lambda conn: sqlite_conn(conn).set_trace_callback(statements.append))
    hits = await memory.search("main", "moves")
    await db.run(lambda conn: sqlite_conn(conn).set_trace_callback(None))
    assert [h.note.slug for h in hits] == ["stable"]
    assert statements, "the trace saw the search itself"
    assert not [
        s for s in statements if s.upper().startswith(("BEGIN", "INSERT", "UPDATE", "DELETE"))
    ]


async def test_an_edit_rewrites_only_the_changed_row(memory: Memory, home: Home) -> None:
    for number in range(5):
        await memory.save("main", f"Note {number}", f"body {number}", provenance=AGENT)
    path = home.agent_dir("main") / "memory" / "note-3.md"
    path.write_text(path.read_text() + "more\n")
    stats = await memory.reindex("main")
    assert (stats.scanned, stats.updated, stats.removed) == (5, 1, 0)


async def test_deleting_memory_db_rebuilds_the_index_from_the_files(
    open_memory: Callable[..., Memory], home: Home
) -> None:
    first = open_memory()
    await first.save("main", "Keys", "The spare key is under the blue pot.", provenance=AGENT)
    await first.close()
    for suffix in ("", "-wal", "-shm"):
        (home.agent_dir("main") / f"memory.db{suffix}").unlink(missing_ok=True)
    second = open_memory()
    hits = await second.search("main", "spare pot")
    assert [h.note.slug for h in hits] == ["keys"]
    assert [c.op for c in await second.history("main")] == ["created"]


async def test_full_reindex_rebuilds_every_row(memory: Memory) -> None:
    await memory.save("main", "A", "alpha", provenance=AGENT)
    await memory.save("main", "B", "beta", provenance=AGENT)
    stats = await memory.reindex("main", full=True)
    assert (stats.scanned, stats.updated) == (2, 2)
    assert [h.note.slug for h in await memory.search("main", "beta")] == ["b"]


async def test_title_matches_rank_above_tag_matches_above_body_matches(memory: Memory) -> None:
    await memory.save("main", "Gardening tips", "Water early.", provenance=AGENT)
    await memory.save("main", "Weekend", "Plans.", tags=["gardening"], provenance=AGENT)
    await memory.save("main", "Chores", "Some gardening on Sunday.", provenance=AGENT)
    hits = await memory.search("main", "gardening")
    assert [h.note.slug for h in hits] == ["gardening-tips", "weekend", "chores"]
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[2].snippet == "Some [gardening] on Sunday."


async def test_search_ranks_by_the_words_a_note_holds_where_they_stand_and_how_rare(
    memory: Memory,
) -> None:
    await memory.save("main", "Kitchen", "coffee and tea", provenance=AGENT)
    await memory.save("main", "Coffee", "morning", provenance=AGENT)
    await memory.save("main", "Notes", "tea", provenance=AGENT)
    await memory.save("main", "Notes two", "coffee", provenance=AGENT)
    await memory.save("main", "Notes three", "coffee", provenance=AGENT)
    hits = await memory.search("main", "coffee tea")
    # A title word (x10) first; both words in the body next; the rarer word alone (tea:
    # two of the five notes) before the commoner (coffee: four); equal scores newest first.
    assert [h.note.slug for h in hits] == ["coffee", "kitchen", "notes", "notes-three", "notes-two"]
    assert hits[0].score > hits[1].score > hits[2].score > hits[3].score == hits[4].score


async def test_search_ranks_a_bounded_window_of_the_newest_matching_notes(
    memory: Memory,
) -> None:
    await memory.save("main", "Harbour", "the old lantern", provenance=AGENT)
    for number in range(4):
        await memory.save("main", f"Walk {number}", "a lantern walk", provenance=AGENT)
    db = await memory.database("main")

    async def slugs(query: str) -> list[str]:
        def _ranked(conn: sqlite3.Connection) -> list[str]:
            ranked = rank_window(conn, query, limit=10, window=2)
            sql = "SELECT slug FROM notes WHERE id = ?"
            return [conn.execute(sql, (rowid,)).fetchone()[0] for rowid, _ in ranked]

        return await db.run(_ranked)

    # Five notes hold "lantern": only the newest two are ranked.
    assert await slugs("lantern") == ["walk-3", "walk-2"]
    # The window counts the matches of the query: a rare word reaches back.
    assert await slugs("harbour") == ["harbour"]
    assert len(await memory.search("main", "lantern")) == 5


async def test_an_old_note_titled_with_the_word_is_ranked_beyond_the_window(
    memory: Memory,
) -> None:
    await memory.save("main", "Lantern", "how the old one was mended", provenance=AGENT)
    await memory.save("main", "Shed", "the lantern hook", tags=["lantern"], provenance=AGENT)
    for number in range(4):
        await memory.save("main", f"Walk {number}", "a lantern walk", provenance=AGENT)
    db = await memory.database("main")

    def _ranked(conn: sqlite3.Connection) -> list[str]:
        ranked = rank_window(conn, "lantern", limit=10, window=2)
        sql = "SELECT slug FROM notes WHERE id = ?"
        return [conn.execute(sql, (rowid,)).fetchone()[0] for rowid, _ in ranked]

    # The body window holds the newest two walks; the title and the tag reach back.
    assert await db.run(_ranked) == ["lantern", "shed", "walk-3", "walk-2"]


async def test_search_ranks_the_newest_hundred_notes_holding_a_query_word(
    memory: Memory, home: Home
) -> None:
    folder = home.agent_dir("main") / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "first.md").write_text("The lantern by the harbour.\n")
    # Indexed alone, before the others: the oldest row.
    assert [h.note.slug for h in await memory.search("main", "harbour")] == ["first"]
    for number in range(99):
        (folder / f"walk-{number}.md").write_text("A lantern walk.\n")
    # A hundred notes hold a query word: the oldest is in the window, first (both words).
    hits = await memory.search("main", "lantern harbour", limit=100)
    assert len(hits) == 100
    assert hits[0].note.slug == "first"
    (folder / "walk-99.md").write_text("A lantern walk.\n")
    # A hundred newer notes hold one: the oldest, holding the words in its body only, is
    # past the window, and the newest hundred are ranked.
    hits = await memory.search("main", "lantern harbour", limit=100)
    assert len(hits) == 100
    assert "first" not in [h.note.slug for h in hits]
    # Searched alone, the word only it holds still finds it.
    assert [h.note.slug for h in await memory.search("main", "harbour")] == ["first"]


def ranked_slugs(conn: sqlite3.Connection, query: str, window: int) -> list[str]:
    """rank_window's notes as slugs, best first."""
    ranked = rank_window(conn, query, limit=10, window=window)
    sql = "SELECT slug FROM notes WHERE id = ?"
    return [conn.execute(sql, (rowid,)).fetchone()[0] for rowid, _ in ranked]


async def test_an_index_from_before_the_title_and_tag_tables_still_ranks_old_titles(
    open_memory: Callable[..., Memory], home: Home
) -> None:
    first = open_memory()
    await first.save("main", "Lantern", "how the old one was mended", provenance=AGENT)
    await first.save("main", "Shed", "the lantern hook", tags=["lantern"], provenance=AGENT)
    for number in range(4):
        await first.save("main", f"Walk {number}", "a lantern walk", provenance=AGENT)
    await first.close()
    # memory.db as schema version 1 left it: the words in notes_fts alone.
    conn = sqlite3.connect(home.agent_dir("main") / "memory.db")
    conn.execute("DROP TABLE note_titles_fts")
    conn.execute("DROP TABLE note_tags_fts")
    conn.execute("DELETE FROM schema_migrations WHERE version = 2")
    conn.commit()
    conn.close()
    second = open_memory()
    db = await second.database("main")
    ranked = await db.run(lambda conn: ranked_slugs(conn, "lantern", 2))
    assert ranked == ["lantern", "shed", "walk-3", "walk-2"]


async def test_a_changed_title_or_a_forgotten_note_leaves_the_title_and_tag_windows(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Lantern", "how it was mended", provenance=AGENT)
    await memory.save("main", "Shed", "the hook", tags=["lamp"], provenance=AGENT)
    path = home.agent_dir("main") / "memory" / "lantern.md"
    path.write_text(path.read_text().replace("Lantern", "Torch"))
    assert [h.note.slug for h in await memory.search("main", "torch")] == ["lantern"]
    assert await memory.search("main", "lantern") == []
    await memory.forget("main", "shed", provenance=AGENT)
    assert await memory.search("main", "lamp") == []
    db = await memory.database("main")
    rows = await db.run(
        lambda conn: [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in FTS_TABLES]
    )
    assert rows == [1, 1, 1]


async def test_a_first_build_leaves_each_search_table_merged_into_one_segment(
    memory: Memory, home: Home
) -> None:
    folder = home.agent_dir("main") / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(6):  # 60 KB each: three write transactions, three segments
        (folder / f"walk-{number}.md").write_text(f"lantern walk {number} " * 4_000)
    assert len(await memory.search("main", "lantern")) == 6
    db = await memory.database("main")
    # FTS5's merge of every segment into one finds nothing left to merge.
    left = await db.write(
        lambda conn: [merge_step(conn, table, -MERGE_PAGES) for table in FTS_TABLES]
    )
    assert left == [False, False, False]


async def test_words_are_stemmed_and_or_ed(memory: Memory) -> None:
    await memory.save("main", "Runs", "She was running a marathon.", provenance=AGENT)
    await memory.save("main", "Swim", "Swimming lessons.", provenance=AGENT)
    hits = await memory.search("main", "runs swimming")
    assert sorted(h.note.slug for h in hits) == ["runs", "swim"]


async def test_a_tag_filter_requires_every_tag(memory: Memory) -> None:
    await memory.save(
        "main", "Pasta", "Carbonara recipe.", tags=["food", "italy"], provenance=AGENT
    )
    await memory.save("main", "Pizza", "Margherita recipe.", tags=["food"], provenance=AGENT)
    await memory.save("main", "Rome", "Trip recipe notes.", tags=["italy"], provenance=AGENT)
    assert [h.note.slug for h in await memory.search("main", "recipe", tags=("food", "Italy"))] == [
        "pasta"
    ]
    only_tags = await memory.search("main", "", tags=("food",))
    assert [h.note.slug for h in only_tags] == ["pizza", "pasta"]  # newest first
    assert only_tags[0].snippet == "Margherita recipe."
    assert await memory.search("main", "") == []


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "*",
        "NEAR(",
        "a OR",
        "AND",
        "\x00",
        "title:x",
        "^x",
        "(a",
        "a -b",
        "' OR 1=1 --",
        "x" * 10_000,
        "word " * 2_000,
    ],
)
async def test_hostile_queries_never_raise(memory: Memory, query: str) -> None:
    await memory.save("main", "Plain", "a word x title", provenance=AGENT)
    hits = await memory.search("main", query)
    assert isinstance(hits, list)


async def test_dot_files_and_folders_are_not_notes(memory: Memory, home: Home) -> None:
    folder = home.agent_dir("main") / "memory"
    (folder / ".trash").mkdir(parents=True)
    (folder / ".trash" / "old.md").write_text("trashed secretword\n")
    (folder / ".review.log").write_text("secretword\n")
    (folder / ".hidden.md").write_text("secretword\n")
    (folder / "sub.md").mkdir()
    os.symlink("/etc/hostname", folder / "link.md")
    assert await memory.search("main", "secretword") == []
    _, total = await memory.list_notes("main")
    assert total == 0


async def test_the_review_and_embedding_tables_exist_with_their_schema(memory: Memory) -> None:
    db = await memory.database("main")

    def columns(conn: sqlite3.Connection) -> dict[str, list[str]]:
        return {
            table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            for table in ("reviews", "review_runs", "embeddings", "notes")
        }

    found = await db.run(columns)
    assert found["reviews"] == ["session", "position", "at"]
    assert found["review_runs"] == [
        "id",
        "kind",
        "session",
        "plan",
        "applied",
        "done",
        "tokens",
        "created",
        "finished",
    ]
    assert found["embeddings"] == ["model", "hash", "vector"]
    assert {"text_hash", "read_at", "mtime_ns", "size"} <= set(found["notes"])


async def test_reading_a_note_records_when(memory: Memory) -> None:
    await memory.save("main", "Read me", "text", provenance=AGENT)
    db = await memory.database("main")
    row = await db.fetchone("SELECT read_at FROM notes WHERE slug = 'read-me'")
    assert row is not None and row["read_at"] is None
    await memory.read("main", "read-me")
    row = await db.fetchone("SELECT read_at FROM notes WHERE slug = 'read-me'")
    assert row is not None and row["read_at"]


async def test_concurrent_saves_and_searches_never_look_like_hand_edits(memory: Memory) -> None:
    await memory.save("main", "Seed", "first", provenance=AGENT)
    jobs: list[Awaitable[object]] = []
    for number in range(15):
        jobs.append(memory.save("main", f"Parallel {number}", f"body {number}", provenance=AGENT))
        jobs.append(memory.search("main", "body"))
        jobs.append(memory.save("main", "Seed", f"version {number}", provenance=AGENT))
    await asyncio.gather(*jobs)
    changes = await memory.history("main", limit=200)
    assert [c for c in changes if c.by == "hand"] == []
    assert len(changes) == 31


async def test_a_search_cancelled_midway_still_records_the_hand_edit_it_noticed(
    memory: Memory, home: Home
) -> None:
    """A client that hangs up mid-search must not leave the index updated and the
    history without the hand edit (the next sync would see nothing to record)."""
    await memory.save("main", "Bike", "version 0", provenance=AGENT)
    path = home.agent_dir("main") / "memory" / "bike.md"
    for round_number in range(1, 25):
        path.write_text(
            path.read_text().replace(f"version {round_number - 1}", f"version {round_number}")
        )
        task = asyncio.create_task(memory.search("main", "version"))
        for _ in range(round_number % 8):
            await asyncio.sleep(0)  # cancel at a different point of the sync each round
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        changes = await memory.history("main", name="bike", limit=100)
        assert [c.by for c in changes].count("hand") == round_number, round_number
