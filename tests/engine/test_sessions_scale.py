"""Transcript reads whose cost must not grow with the history: the recent list reads
the newest rows by index, and search ranks a bounded window of the newest matches."""

from __future__ import annotations

import pytest

from habakkuk.engine import sessions as sessions_module
from habakkuk.engine.llm.types import Message, TextBlock
from habakkuk.engine.sessions import TranscriptStore


async def _plan(store: TranscriptStore, sql: str, params: tuple[object, ...]) -> str:
    rows = await store.db.fetchall(f"EXPLAIN QUERY PLAN {sql}", params)
    return " | ".join(str(row["detail"]) for row in rows)


async def test_the_recent_list_reads_the_newest_sessions_by_index(
    store: TranscriptStore,
) -> None:
    for number in range(5):
        await store.create_session(f"s{number}", "main" if number % 2 else "ops", "")
        await store.append(f"s{number}", Message.user_text(f"message {number}"))
    await store.set_archived("s4", True)
    listed = await store.list_sessions(limit=3)
    assert [s.id for s in listed] == ["s3", "s2", "s1"]
    assert [s.id for s in await store.list_sessions(archived=True)] == ["s4"]
    plan = await _plan(
        store,
        "SELECT * FROM sessions WHERE archived = ? ORDER BY updated_at DESC, rowid DESC LIMIT ?",
        (0, 200),
    )
    assert "sessions_listed" in plan and "TEMP B-TREE" not in plan
    # The user's sessions only (the list's default): still the index, still no sort.
    plan = await _plan(
        store,
        "SELECT * FROM sessions WHERE archived = ? AND origin NOT IN (?, ?)"
        " ORDER BY updated_at DESC, rowid DESC LIMIT ?",
        (0, "board", "delegate", 200),
    )
    assert "sessions_listed" in plan and "TEMP B-TREE" not in plan
    await store.create_session("s5", "main", "", origin="board")
    assert [s.id for s in await store.list_sessions(limit=2, without=("board",))] == ["s3", "s2"]
    assert [s.id for s in await store.list_sessions(limit=1)] == ["s5"]


async def test_search_ranks_the_newest_matches_within_its_window(
    store: TranscriptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create_session("old", "main", "")
    await store.create_session("new", "main", "")
    # The oldest message matches best (the word three times in three words).
    await store.append("old", Message.user_text("garden garden garden"))
    for number in range(4):
        filler = " ".join(["walk"] * number)
        await store.append("new", Message.user_text(f"the garden {filler} again"))
    everything = await store.search("garden", limit=10)
    assert (everything[0].session, everything[0].seq) == ("old", 0)
    assert len(everything) == 5
    monkeypatch.setattr(sessions_module, "SEARCH_WINDOW", 3)
    windowed = await store.search("garden", limit=10)
    # The three newest matches, best first (fewer other words rank higher).
    assert [(h.session, h.seq) for h in windowed] == [("new", 1), ("new", 2), ("new", 3)]
    assert all("[garden]" in h.snippet for h in windowed)
    limited = await store.search("garden", limit=2)
    assert [(h.session, h.seq) for h in limited] == [("new", 1), ("new", 2)]


async def test_search_of_one_agent_fills_its_window_with_that_agents_matches(
    store: TranscriptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions_module, "SEARCH_WINDOW", 2)
    await store.create_session("ops-1", "ops", "")
    await store.append("ops-1", Message("assistant", [TextBlock("the backup ran at noon")]))
    await store.create_session("main-1", "main", "")
    for number in range(5):
        await store.append("main-1", Message.user_text(f"backup number {number}"))
    hits = await store.search("backup", agent="ops")
    assert [(h.session, h.agent, h.role) for h in hits] == [("ops-1", "ops", "assistant")]
    assert len(await store.search("backup")) == 2
