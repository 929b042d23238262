"""Forking a session: one-transaction copy, never cut between a tool call and its result."""

from __future__ import annotations

import sqlite3

import pytest

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.sql import Conn
from tests.conftest import OpenRuntime, mock_config


@pytest.fixture
def store(transcripts_on: TranscriptStore) -> TranscriptStore:
    """The transcripts on each engine: these tests are the store's contract on both."""
    return transcripts_on


def call(id_: str) -> ToolUseBlock:
    return ToolUseBlock(id_, "exec", {"command": "true"})


async def tool_session(store: TranscriptStore) -> None:
    """seq 0 user, 1 call a, 2 result a, 3 text, 4 user, 5 calls b+c, 6 results b+c, 7 text."""
    await store.create_session("src", "main", "FROZEN PROMPT", origin="tui")
    for message in [
        Message.user_text("list the files"),
        Message("assistant", [TextBlock("looking"), call("a")]),
        Message("user", [ToolResultBlock("a", "one.txt")]),
        Message("assistant", [TextBlock("there is one.txt")]),
        Message.user_text("and the sizes?"),
        Message("assistant", [call("b"), call("c")]),
        Message("user", [ToolResultBlock("b", "3"), ToolResultBlock("c", "4")]),
        Message("assistant", [TextBlock("3 and 4 bytes")]),
    ]:
        await store.append("src", message, turn_id="t")
    await store.set_title("src", "Files", "user")


async def test_fork_copies_the_session_row_and_every_message(store: TranscriptStore) -> None:
    await tool_session(store)
    fork = await store.fork("src", "dst")
    source = await store.get_session("src")
    assert source is not None
    assert (fork.id, fork.agent, fork.system_prompt, fork.origin) == (
        "dst",
        "main",
        "FROZEN PROMPT",
        "tui",
    )
    assert (fork.title, fork.title_source, fork.forked_from) == ("Fork of Files", "user", "src")
    assert not fork.archived
    copied = await store.messages("dst")
    original = await store.messages("src")
    assert [(m.seq, m.role, m.raw_blocks, m.turn_id) for m in copied] == [
        (m.seq, m.role, m.raw_blocks, m.turn_id) for m in original
    ]


async def test_fork_up_to_a_seq_copies_only_that_far(store: TranscriptStore) -> None:
    await tool_session(store)
    await store.fork("src", "dst", upto_seq=3)
    assert [m.seq for m in await store.messages("dst")] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("upto", "copied"),
    [(1, 0), (2, 2), (5, 4), (6, 6), (0, 0)],
)
async def test_fork_never_separates_a_tool_call_from_its_result(
    store: TranscriptStore, upto: int, copied: int
) -> None:
    await tool_session(store)
    await store.fork("src", "dst", upto_seq=upto)
    messages = await store.messages("dst")
    assert messages[-1].seq == copied
    calls = {b.tool_use_id for m in messages for b in m.message.tool_uses}
    results = {b.tool_use_id for m in messages for b in m.message.tool_results}
    assert calls == results


async def test_fork_before_the_first_message_is_an_empty_copy(store: TranscriptStore) -> None:
    await tool_session(store)
    fork = await store.fork("src", "dst", upto_seq=-1)
    assert await store.messages("dst") == []
    assert fork.forked_from == "src"


async def test_a_call_still_waiting_for_its_result_at_the_end_is_not_copied(
    store: TranscriptStore,
) -> None:
    await store.create_session("src", "main", "P")
    await store.append("src", Message.user_text("run it"))
    await store.append("src", Message("assistant", [call("x")]))
    await store.fork("src", "dst")
    assert [m.seq for m in await store.messages("dst")] == [0]


async def test_a_call_interrupted_long_ago_does_not_stop_the_copy(
    store: TranscriptStore,
) -> None:
    # The call never got a result, but the conversation went on (repair answers it).
    await store.create_session("src", "main", "P")
    await store.append("src", Message.user_text("run it"))
    await store.append("src", Message("assistant", [call("x")]))
    await store.append("src", Message.user_text("never mind"))
    await store.append("src", Message("assistant", [TextBlock("ok")]))
    await store.fork("src", "dst")
    assert [m.seq for m in await store.messages("dst")] == [0, 1, 2, 3]


async def test_transcripts_are_independent_after_a_fork(store: TranscriptStore) -> None:
    await tool_session(store)
    await store.fork("src", "dst", upto_seq=3)
    assert await store.append("dst", Message.user_text("something else")) == 4
    await store.append("src", Message.user_text("more in the original"))
    last = (await store.messages("dst"))[-1].message.blocks[0]
    assert isinstance(last, TextBlock) and last.text == "something else"
    assert len(await store.messages("src")) == 9
    assert len(await store.messages("dst")) == 5
    await store.set_title("dst", "Other route", "user")
    source = await store.get_session("src")
    assert source is not None and source.title == "Files"


async def test_search_finds_the_copied_text_in_the_fork(store: TranscriptStore) -> None:
    await tool_session(store)
    await store.fork("src", "dst")
    hits = await store.search("sizes")
    assert {h.session for h in hits} == {"src", "dst"}
    fork_hit = next(h for h in hits if h.session == "dst")
    assert fork_hit.title == "Fork of Files" and "[sizes]" in fork_hit.snippet


async def test_fork_of_a_missing_session_or_onto_an_existing_id_fails_cleanly(
    store: TranscriptStore,
) -> None:
    await tool_session(store)
    with pytest.raises(NotFound, match="'nope' not found"):
        await store.fork("nope", "dst")
    await store.create_session("taken", "main", "P")
    with pytest.raises(HabakkukError, match="'taken' already exists"):
        await store.fork("src", "taken")
    # Nothing half-written.
    assert await store.messages("taken") == []


async def test_fork_is_one_transaction(
    store: TranscriptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await tool_session(store)

    def broken(conn: Conn) -> None:
        # The copied messages are refused: that undoes the session row too.
        if store.db.dialect == "sqlite":
            conn.execute(
                "CREATE TEMP TRIGGER fail_copy BEFORE INSERT ON messages"
                " WHEN NEW.session_id = 'dst' BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
        else:
            conn.execute(
                "ALTER TABLE messages ADD CONSTRAINT disk_full CHECK (session_id <> 'dst')"
            )

    await store.db.run(broken)
    with pytest.raises(sqlite3.DatabaseError, match=r"disk.full"):
        await store.fork("src", "dst")
    assert await store.get_session("dst") is None


async def test_runtime_fork_copies_up_to_the_last_finished_turn(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(mock_config())
    session = await runtime.sessions.new_session(None, origin="test")
    await runtime.settings.set_session_model(session.id, "mock/other")
    await runtime.settings.set_session_thinking(session.id, "high")
    transcripts = runtime.transcripts
    await transcripts.append(session.id, Message.user_text("hello"), turn_id="turn_done")
    await transcripts.append(
        session.id, Message("assistant", [TextBlock("hello back")]), turn_id="turn_done"
    )
    # A turn still under way (its user message written, its job active) is not copied.
    await transcripts.append(session.id, Message.user_text("half done"), turn_id="turn_x")
    await runtime.queue.enqueue(
        "turn_x", "turn", {"session": session.id, "text": "half done"}, serial_key=session.id
    )
    fork = await runtime.sessions.fork_session(session.id)
    assert fork.forked_from == session.id and fork.id != session.id
    assert [m.role for m in await runtime.sessions.messages(fork.id)] == ["user", "assistant"]
    assert str(await runtime.settings.session_model(fork.id)) == "mock/other"
    assert await runtime.settings.session_thinking(fork.id) == ("high", True)
    with pytest.raises(NotFound):
        await runtime.sessions.fork_session("ses_missing")
