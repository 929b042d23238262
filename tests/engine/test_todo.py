"""The todo list: state.db store, the tool, and the list riding along with each turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from habakkuk.engine.llm.types import ContextBlock, Message, TextBlock
from habakkuk.engine.state import MAX_TODO_ITEMS, StateStore, TodoError
from tests.conftest import mock_config


@pytest.fixture
def store(state_on: StateStore) -> StateStore:
    """state on each engine: these tests are the todo list's contract on both."""
    return state_on


async def test_items_are_numbered_updated_and_completed(store: StateStore) -> None:
    items = await store.add_todos("s1", ["write tests", "  fix   the bug "])
    assert [(i.number, i.text, i.status) for i in items] == [
        (1, "write tests", "pending"),
        (2, "fix the bug", "pending"),
    ]
    await store.update_todo("s1", 2, status="in_progress")
    items = await store.update_todo("s1", 1, status="done", text="write more tests")
    assert [(i.number, i.text, i.status) for i in items] == [
        (1, "write more tests", "done"),
        (2, "fix the bug", "in_progress"),
    ]
    assert await store.todos("s2") == []


async def test_the_list_holds_at_most_fifty_items(store: StateStore) -> None:
    await store.add_todos("s", [f"item {i}" for i in range(MAX_TODO_ITEMS)])
    with pytest.raises(TodoError, match="at most 50"):
        await store.add_todos("s", ["one too many"])
    assert len(await store.todos("s")) == MAX_TODO_ITEMS


async def test_unknown_item_and_empty_text_are_errors(store: StateStore) -> None:
    with pytest.raises(TodoError, match="no todo item 9"):
        await store.update_todo("s", 9, status="done")
    with pytest.raises(TodoError, match="empty"):
        await store.add_todos("s", ["   "])


async def test_clear_done_only_keeps_open_items(store: StateStore) -> None:
    await store.add_todos("s", ["a", "b"])
    await store.update_todo("s", 1, status="done")
    left = await store.clear_todos("s", done_only=True)
    assert [i.text for i in left] == ["b"]
    assert await store.clear_todos("s") == []


async def test_note_only_while_an_item_is_open(store: StateStore) -> None:
    assert await store.todo_note("s") is None
    await store.add_todos("s", ["a"])
    note = await store.todo_note("s")
    assert note is not None and "[ ] 1. a" in note
    await store.update_todo("s", 1, status="done")
    assert await store.todo_note("s") is None


TODO_SCRIPT = """
- match: "plan"
  steps:
    - tool_calls:
        - {name: todo, arguments: {action: add, items: ["read the code", "write the fix"]}}
    - tool_calls:
        - {name: todo, arguments: {action: complete, number: 1}}
    - text: "planned"
- match: "finish"
  steps:
    - tool_calls:
        - {name: todo, arguments: {action: complete, number: 2}}
    - text: "finished"
- steps:
    - text: "ok"
"""


def todo_notes(message: Message) -> list[ContextBlock]:
    return [b for b in message.blocks if isinstance(b, ContextBlock) and b.kind == "todo"]


async def turn(runtime: Any, session: str, text: str) -> None:
    outcome = await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session, text)), 30
    )
    assert outcome.status == "done", outcome.error


async def test_open_items_are_appended_to_each_turns_user_message(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config(TODO_SCRIPT, mode="read-only"))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    await turn(runtime, session.id, "plan the work")
    stored = await runtime.sessions.messages(session.id)
    results = [r for m in stored for r in m.message.tool_results]
    assert not any(r.is_error for r in results), results  # todo runs even in read-only mode
    assert "[x] 1. read the code" in results[-1].text and "[1 open of 2]" in results[-1].text
    await turn(runtime, session.id, "next step")
    stored = await runtime.sessions.messages(session.id)
    user = [m.message for m in stored if m.message.role == "user" and m.message.text]
    last = user[-1]
    assert isinstance(last.blocks[0], TextBlock) and last.blocks[0].text == "next step"
    note = last.blocks[-1]
    assert isinstance(note, ContextBlock) and note.kind == "todo"
    assert "[x] 1. read the code" in note.text and "[ ] 2. write the fix" in note.text
    assert not todo_notes(user[0])  # the first turn had no list yet
    await turn(runtime, session.id, "finish it")
    await turn(runtime, session.id, "anything else")
    stored = await runtime.sessions.messages(session.id)
    last = [m.message for m in stored if m.message.role == "user" and m.message.text][-1]
    assert not todo_notes(last)  # nothing open any more


async def test_lists_are_per_session(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config(TODO_SCRIPT))
    first = await runtime.sessions.new_session()
    second = await runtime.sessions.new_session()
    runtime.start_workers()
    await turn(runtime, first.id, "plan the work")
    assert len(await runtime.state.todos(first.id)) == 2
    assert await runtime.state.todos(second.id) == []
