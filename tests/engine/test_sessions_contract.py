"""Sessions, transcripts, search and state: one contract, run on SQLite and PostgreSQL.

Each test runs once per engine (`transcripts_on` / `state_on`, through the `storage`
fixture of tests/pg_fixtures.py) and expects the same answers from both: the search
tests name the exact hits, in order, so the two engines cannot drift apart. (The
store's other tests, test_sessions.py, test_sessions_fork.py, test_compaction.py and
test_todo.py, run on both engines the same way.)
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from habakkuk.engine.llm.types import (
    ContextBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from habakkuk.engine.retention import prune_idle_sessions
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.sql import Conn
from habakkuk.engine.state import ProviderJob, StateStore, read_turn_state

CORPUS: list[tuple[str, Role, str]] = [
    ("s", "user", "garden tomato"),  # 0: the phrase, short
    ("s", "assistant", "the tomato in the garden"),  # 1: both words apart
    ("s", "user", "a garden tomato salad with basil and oil"),  # 2: the phrase, longer
    ("s", "assistant", "tomato garden"),  # 3: both words apart, as short as 0
    ("s", "user", "tomato garden"),  # 4: the same, newer
    ("s", "assistant", "a garden of roses"),  # 5: one word only
    ("s", "user", "deploy to example.com/status at 3.14 pm, a well-known issue"),  # 6
    ("s", "assistant", "Deploy the BACKUP server"),  # 7
    ("o", "assistant", "backup done"),  # o 0
]


async def corpus(store: TranscriptStore) -> None:
    await store.create_session("s", "main", "")
    await store.create_session("o", "ops", "")
    for session, role, text in CORPUS:
        await store.append(session, Message(role, [TextBlock(text)]))


def seqs(hits: list[Any]) -> list[tuple[str, int]]:
    return [(hit.session, hit.seq) for hit in hits]


@pytest.fixture
def store(transcripts_on: TranscriptStore) -> TranscriptStore:
    return transcripts_on


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # The phrase first, then the shorter, then the newest.
        ("garden tomato", [("s", 0), ("s", 2), ("s", 4), ("s", 3), ("s", 1)]),
        ('"garden tomato"', [("s", 0), ("s", 2)]),
        ("GARDEN roses", [("s", 5)]),
        # A host name, a number with a point, a hyphenated word: their words, as FTS5.
        ("example", [("s", 6)]),
        ("status 14", [("s", 6)]),
        ('"well-known"', [("s", 6)]),
        ("known well", [("s", 6)]),
        ("deploy", [("s", 7), ("s", 6)]),
        ("backup", [("o", 0), ("s", 7)]),
        # Query syntax of either engine is plain words.
        ('deploy "backup', [("s", 7)]),
        ("deploy OR backup", []),  # OR is a word, found in none
        # "&" is no word; the rest in that order ("tomato garden") first.
        ("tomato & !garden", [("s", 4), ("s", 3), ("s", 0), ("s", 1), ("s", 2)]),
        ("nothing-like-this", []),
        ("", []),
        ("(", []),
    ],
)
async def test_search_finds_the_same_hits_in_the_same_order_on_both_engines(
    store: TranscriptStore, query: str, expected: list[tuple[str, int]]
) -> None:
    await corpus(store)
    assert seqs(await store.search(query)) == expected


async def test_search_ignores_diacritics_on_both_engines(store: TranscriptStore) -> None:
    await store.create_session("s", "main", "")
    for text in ("a café in Zürich", "Crème brûlée for two", "plain cafe"):
        await store.append("s", Message("user", [TextBlock(text)]))
    assert seqs(await store.search("cafe")) == [("s", 2), ("s", 0)]
    assert seqs(await store.search("CAFÉ zurich")) == [("s", 0)]
    assert seqs(await store.search('"creme brulee"')) == [("s", 1)]


async def test_search_by_agent_with_a_window_and_a_limit(store: TranscriptStore) -> None:
    await corpus(store)
    assert seqs(await store.search("backup", agent="ops")) == [("o", 0)]
    assert seqs(await store.search("backup", agent="main")) == [("s", 7)]
    assert seqs(await store.search('"garden tomato"', agent="main")) == [("s", 0), ("s", 2)]
    assert await store.search('"garden tomato"', agent="ops") == []
    assert seqs(await store.search('backup "done"', agent="ops")) == [("o", 0)]
    # The newest two messages holding the word, the shorter first.
    assert seqs(await store.search("garden", window=2)) == [("s", 4), ("s", 5)]
    # Of equal length, the newest first.
    assert seqs(await store.search("garden", limit=2)) == [("s", 4), ("s", 3)]
    # A phrase is looked for among the newest messages holding all its words only.
    assert seqs(await store.search('"garden tomato"', window=1)) == []
    assert seqs(await store.search('"garden tomato"', window=3)) == [("s", 2)]


async def test_a_hit_carries_its_session_and_a_highlighted_snippet(
    store: TranscriptStore,
) -> None:
    await corpus(store)
    await store.set_title("s", "Plans")
    [hit] = await store.search("roses")
    assert (hit.session, hit.agent, hit.title, hit.seq, hit.role) == (
        "s",
        "main",
        "Plans",
        5,
        "assistant",
    )
    assert hit.snippet == "a garden of [roses]"
    assert hit.at > 0


async def test_only_the_users_and_assistants_words_are_indexed(store: TranscriptStore) -> None:
    await store.create_session("s", "main", "")
    await store.append(
        "s",
        Message(
            "user",
            [
                TextBlock("hello there"),
                # What older versions stored as text after the words: not the user's.
                TextBlock("[current time: 2026-01-01 10:00 (UTC)]"),
                TextBlock("[your todo list for this session]\n[ ] 1. water plants"),
                ContextBlock("[current time: 2026-01-02 10:00 (UTC)]", "time"),
            ],
        ),
    )
    await store.append("s", Message("assistant", [ToolUseBlock("c", "exec", {"x": "zebra"})]))
    await store.append("s", Message("user", [ToolResultBlock("c", "zebra output")]))
    # A row whose blocks are not JSON is kept and left out of the index.
    await store.db.write(
        lambda conn: conn.execute(
            "INSERT INTO messages(session_id, seq, role, model, blocks, turn_id, created_at)"
            " VALUES ('s', 3, 'user', '', '{broken', '', 0)"
        )
    )
    await store.append("s", Message("assistant", [TextBlock("answered")]))
    assert seqs(await store.search("hello")) == [("s", 0)]
    assert seqs(await store.search("answered")) == [("s", 4)]
    for absent in ("current", "plants", "zebra", "broken"):
        assert await store.search(absent) == [], absent
    indexed = await store.db.fetchall("SELECT seq, text FROM message_text ORDER BY seq")
    assert [(row["seq"], row["text"]) for row in indexed] == [(0, "hello there"), (4, "answered")]


async def test_the_indexed_words_are_cut_to_eight_thousand_characters(
    store: TranscriptStore,
) -> None:
    await store.create_session("s", "main", "")
    await store.append("s", Message.user_text("word " * 1599 + "early" + " late" * 100))
    row = await store.db.fetchone("SELECT length(text) FROM message_text")
    assert row is not None and row[0] == 8000
    assert seqs(await store.search("early")) == [("s", 0)]
    assert await store.search("late") == []


async def test_sessions_list_newest_first_and_ties_by_creation(store: TranscriptStore) -> None:
    for number in range(4):
        await store.create_session(f"s{number}", "main" if number % 2 else "ops", "")
    await store.db.write(lambda conn: conn.execute("UPDATE sessions SET updated_at = 5"))
    await store.create_session("work", "main", "", origin="board")
    await store.set_archived("s0", True)
    assert [s.id for s in await store.list_sessions(without=("board",))] == ["s3", "s2", "s1"]
    assert [s.id for s in await store.list_sessions("main")] == ["work", "s3", "s1"]
    assert [s.id for s in await store.list_sessions(archived=True)] == ["s0"]
    archived = await store.get_session("s0")
    assert archived is not None and archived.archived is True


async def test_a_turn_opens_with_the_lease_check_its_message_and_the_sessions_state(
    store: TranscriptStore,
) -> None:
    state_db = store.state_schema
    assert state_db == "state"
    await store.create_session("s", "main", "")
    await store.db.write(
        lambda conn: conn.execute(
            "INSERT INTO state.session_settings(session, name, value, updated_at)"
            " VALUES ('s', 'thinking', 'high', 0)"
        )
    )
    checked: list[str] = []
    read: list[Any] = []

    def message(conn: Conn) -> Message:
        read.append(read_turn_state(conn, "s", state_db))
        return Message.user_text("hi")

    opened = await store.open_turn("s", "t1", message, lambda conn: checked.append("lease"))
    assert opened is not None
    session, view = opened
    assert session.title == "hi" and [m.seq for m in view.kept] == [0] and view.last_seq == 0
    assert checked == ["lease"] and read[0].thinking == "high"
    # Again for the same turn (a retry): the message is not written twice.
    again = await store.open_turn("s", "t1", Message.user_text("hi"), lambda conn: None)
    assert again is not None and again[1].last_seq == 0
    assert await store.open_turn("missing", "t1", None, lambda conn: None) is None


async def test_deleting_and_pruning_sessions_takes_their_rows_and_words(
    store: TranscriptStore,
) -> None:
    await corpus(store)
    assert await store.add_compaction("s", "SUMMARY", 2, 7, None)
    await store.create_session("new", "main", "")
    await store.append("new", Message.user_text("garden party"))
    await store.db.write(
        lambda conn: conn.execute(
            "UPDATE sessions SET updated_at = ? WHERE id <> 'new'", (time.time() - 40 * 86400,)
        )
    )
    assert sorted(await prune_idle_sessions(store, 30)) == ["o", "s"]
    assert seqs(await store.search("garden")) == [("new", 0)]
    assert await store.delete_sessions(["new", "never"]) == ["new"]
    for table in ("sessions", "messages", "message_text", "compactions"):
        row = await store.db.fetchone(f"SELECT count(*) FROM {table}")
        assert row is not None and row[0] == 0, table


# -- state -------------------------------------------------------------------------------


async def test_settings_are_set_replaced_copied_adopted_and_removed(state_on: StateStore) -> None:
    state = state_on
    await state.set_setting("a", "model", "one")
    await state.set_setting("a", "model", "two")
    await state.set_setting("a", "thinking", "high")
    await state.set_setting("b", "model", "old")
    await state.copy_settings("a", "b")
    assert await state.setting("b", "model") == "two"
    assert await state.setting("b", "thinking") == "high"
    await state.adopt_settings("model", {"b": "adopted", "c": "adopted"})
    assert await state.setting("b", "model") == "two"
    assert await state.setting("c", "model") == "adopted"
    await state.set_setting("a", "model", None)
    assert await state.setting("a", "model") is None
    turn = await state.turn_state("b")
    assert (turn.model, turn.thinking, turn.todo_note) == ("two", "high", None)


async def test_a_provider_job_is_recorded_once_and_moved_on(state_on: StateStore) -> None:
    state = state_on
    job = ProviderJob("s", "t", "call", "generate_image", "fal", "sending", detail={"n": 1})
    assert await state.begin_provider_job(job)
    assert not await state.begin_provider_job(job)  # run again: the first record stands
    await state.update_provider_job("s", "t", "call", status="running", job="req-1")
    await state.update_provider_job(
        "s", "t", "call", status="done", detail={"saved": ["a.png"]}, result="1 image"
    )
    stored = await state.provider_job("s", "t", "call")
    assert stored is not None
    assert (stored.status, stored.job, stored.detail, stored.result) == (
        "done",
        "req-1",
        {"saved": ["a.png"]},
        "1 image",
    )
    assert await state.provider_job("s", "t", "other") is None


async def test_forgetting_sessions_drops_their_state_only(state_on: StateStore) -> None:
    state = state_on
    for session in ("gone", "kept"):
        await state.add_todos(session, ["one"])
        await state.set_setting(session, "thinking", "low")
        await state.begin_provider_job(ProviderJob(session, "t", "c", "tool", "p", "sending"))
    await state.forget_sessions(["gone"])
    assert await state.todos("gone") == [] and await state.setting("gone", "thinking") is None
    assert await state.provider_job("gone", "t", "c") is None
    assert len(await state.todos("kept")) == 1
    assert await state.provider_job("kept", "t", "c") is not None
