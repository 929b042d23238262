"""Transcript reads whose cost must not grow with the history: the recent list reads
the newest rows by index, and search ranks a bounded window of the newest matches by
what the window holds (the phrase, then the shorter message, then the newest)."""

from __future__ import annotations

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


async def test_search_orders_the_phrase_first_then_the_shorter_then_the_newest(
    store: TranscriptStore,
) -> None:
    await store.create_session("s", "main", "")
    texts = [
        "garden tomato",  # 0: the phrase, short
        "the tomato in the garden",  # 1: both words apart
        "a garden tomato salad with basil and oil",  # 2: the phrase, longer
        "tomato garden",  # 3: both words apart, as short as 0
        "tomato garden",  # 4: the same, newer
        "a garden of roses",  # 5: one word only
    ]
    for text in texts:
        await store.append("s", Message.user_text(text))
    both = await store.search("garden tomato")
    assert [h.seq for h in both] == [0, 2, 4, 3, 1]
    # One word: no phrase tier; the shorter first, equal lengths the newest first.
    assert [h.seq for h in await store.search("garden")] == [4, 3, 0, 5, 1, 2]
    # A quoted phrase finds the words only together, as written.
    assert [h.seq for h in await store.search('"tomato garden"')] == [4, 3]
    assert [h.seq for h in await store.search("garden tomato", limit=2)] == [0, 2]
    assert all("[garden]" in h.snippet and "[tomato]" in h.snippet for h in both)


async def test_search_window_drops_old_common_matches_but_a_rare_phrase_reaches_back(
    store: TranscriptStore,
) -> None:
    await store.create_session("old", "main", "")
    await store.create_session("new", "main", "")
    await store.append("old", Message.user_text("the garden behind the quiet harbour lantern"))
    for number in range(5):
        await store.append("new", Message.user_text(f"garden walk {number}"))
    # More matches than the window: only the newest three are ranked, the oldest is out.
    common = await store.search("garden", window=3)
    assert [(h.session, h.seq) for h in common] == [("new", 4), ("new", 3), ("new", 2)]
    assert len(await store.search("garden")) == 6
    # The window counts the matches of the whole query: a rare phrase reaches back.
    for query in ('"quiet harbour lantern"', "garden lantern", "harbour"):
        found = await store.search(query, window=3)
        assert [(h.session, h.seq) for h in found] == [("old", 0)], query
    assert await store.search('"lantern harbour"', window=3) == []
    [phrase] = await store.search('"quiet harbour lantern"')
    assert "[quiet] [harbour] [lantern]" in phrase.snippet


async def test_a_phrase_of_common_words_reaches_back_through_the_messages_holding_them(
    store: TranscriptStore,
) -> None:
    await store.create_session("ops-1", "ops", "")
    await store.append("ops-1", Message.user_text("walk the garden"))
    await store.create_session("s", "main", "")
    await store.append("s", Message.user_text("walk the garden"))  # 0: the phrase, old
    for number in range(3):
        await store.append("s", Message.user_text(f"the garden walk {number}"))  # the words
    await store.append("s", Message.user_text("walk the garden again"))  # 4: the phrase
    # The window is the newest three messages holding every word (2, 3, 4), not the
    # newest three matches of the phrase: the old one is out of reach.
    phrase = '"walk the garden"'
    assert [(h.session, h.seq) for h in await store.search(phrase, window=3)] == [("s", 4)]
    # Within reach, the shorter first, then the newer.
    everything = await store.search(phrase, window=6)
    assert [(h.session, h.seq) for h in everything] == [("s", 0), ("ops-1", 0), ("s", 4)]
    # Of one agent, the window counts that agent's messages only.
    assert [h.session for h in await store.search(phrase, agent="ops", window=1)] == ["ops-1"]
    # A phrase and a word: the window holds every word of both.
    assert [h.seq for h in await store.search(f"{phrase} again", window=1)] == [4]


async def test_search_of_one_agent_fills_its_window_with_that_agents_matches(
    store: TranscriptStore,
) -> None:
    await store.create_session("ops-1", "ops", "")
    await store.append("ops-1", Message("assistant", [TextBlock("the backup ran at noon")]))
    await store.create_session("main-1", "main", "")
    for number in range(5):
        await store.append("main-1", Message.user_text(f"backup number {number}"))
    hits = await store.search("backup", agent="ops", window=2)
    assert [(h.session, h.agent, h.role) for h in hits] == [("ops-1", "ops", "assistant")]
    assert len(await store.search("backup", window=2)) == 2


async def test_a_long_message_of_one_repeated_word_gets_a_short_snippet(
    store: TranscriptStore,
) -> None:
    await store.create_session("s", "main", "")
    await store.append("s", Message.user_text("Garden " * 1_100))
    [hit] = await store.search("garden")
    assert hit.snippet.startswith("[Garden] [Garden]") and hit.snippet.endswith("…")
    assert hit.snippet.count("[Garden]") == 12
