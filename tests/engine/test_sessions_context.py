"""The notes sent with the user's words (the time, the todo list) reach the model and
nothing else: not titles, search, exports or the stored words; older transcripts too."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.export import export_transcript
from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
from habakkuk.engine.llm.types import ContextBlock, Message, TextBlock
from habakkuk.engine.sessions import MIGRATIONS, TranscriptStore
from habakkuk.engine.store import SqliteDatabase
from tests.fakes.model_server import FakeModelServer, Reply

STAMP = re.compile(r"\[current time: \d{4}-\d\d-\d\d \d\d:\d\d \(Europe/Lisbon\)\]")
PROVIDERS = {
    "openai": ("type: openai\n    base_url: {url}/v1", "gpt-fake"),
    "anthropic": ("type: anthropic\n    base_url: {url}", "claude-haiku-4-5"),
}


def remote_config(kind: str, url: str) -> str:
    provider, model = PROVIDERS[kind]
    return (
        "timezone: Europe/Lisbon\n"
        "providers:\n"
        f"  remote:\n    {provider.format(url=url)}\n    key_env: REMOTE_KEY\n"
        f"agents:\n  main:\n    model: remote/{model}\n    mode: full\n"
    )


@pytest.fixture
def srv(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("REMOTE_KEY", "k")
    return model_server


def sent_user_texts(kind: str, body: dict[str, Any]) -> list[str]:
    """The user-message text of a recorded request, as the model read it."""
    if kind == "openai":
        return [m["content"] for m in body["messages"] if m["role"] == "user"]
    return [
        "\n\n".join(part["text"] for part in m["content"] if part["type"] == "text")
        for m in body["messages"]
        if m["role"] == "user"
    ]


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_the_time_reaches_the_model_but_not_titles_search_or_exports(
    kind: str, runtime_factory: Any, srv: FakeModelServer
) -> None:
    runtime = await runtime_factory(remote_config(kind, srv.base_url))
    srv.script(Reply(text="Lisbon in spring is lovely."))
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    turn = await runtime.turns.submit(session.id, "plan the trip to Lisbon")
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "done"
    # The model reads the same bytes as before: the words, then the stamp.
    (sent,) = sent_user_texts(kind, srv.requests[0].json)
    words, _, stamp = sent.partition("\n\n")
    assert words == "plan the trip to Lisbon" and STAMP.fullmatch(stamp)
    # Stored apart from the words.
    first = (await runtime.sessions.messages(session.id))[0].message
    assert first.text == "plan the trip to Lisbon"
    assert [b.kind for b in first.blocks if isinstance(b, ContextBlock)] == ["time"]
    assert (await runtime.sessions.session(session.id)).title == "plan the trip to Lisbon"
    for fmt in ("md", "html", "json"):
        text = await runtime.sessions.export_session(session.id, fmt)
        assert "plan the trip to Lisbon" in text
        assert "current time" not in text and "Europe/Lisbon" not in text, fmt
    for query in ("current", "time", "Europe/Lisbon", "Europe"):
        assert await runtime.sessions.search_sessions(query) == [], query
    hits = await runtime.sessions.search_sessions("trip")
    assert [h.snippet for h in hits] == ["plan the [trip] to Lisbon"]


async def test_the_todo_list_rides_with_the_message_but_is_not_the_users_words(
    runtime_factory: Any, srv: FakeModelServer
) -> None:
    runtime = await runtime_factory(remote_config("openai", srv.base_url))
    srv.script(Reply(text="ok"))
    session = await runtime.sessions.new_session()
    await runtime.state.add_todos(session.id, ["book the ferry"])
    runtime.start_workers()
    await asyncio.wait_for(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "go on")), 30
    )
    (sent,) = sent_user_texts("openai", srv.requests[0].json)
    assert sent.startswith("go on\n\n[current time: ") and "book the ferry" in sent
    assert await runtime.sessions.search_sessions("ferry") == []
    assert "ferry" not in await runtime.sessions.export_session(session.id, "md")


LEGACY_TIME = "[current time: 2025-03-01 09:30 (UTC)]"
LEGACY_NOTE = "Notes from the client application (its system and developer messages):"


async def test_transcripts_written_before_context_blocks_are_reindexed_and_read_without_them(
    tmp_path: Path,
) -> None:
    control = tmp_path / "control.db"
    (await SqliteDatabase.open(control, JOB_MIGRATIONS)).close_sync()
    path = tmp_path / "transcripts.db"
    # A transcripts.db as schema 4 wrote it: the time and todo notes as text blocks,
    # and a /v1 session titled by its client's notes.
    old = TranscriptStore(
        await SqliteDatabase.open(path, MIGRATIONS[:4], attach={"control": control})
    )
    await old.create_session("s1", "main", "")
    todo = "[your todo list for this session]\n- [ ] pack the bags"
    await old.append(
        "s1", Message("user", [TextBlock("pack for the coast"), TextBlock(LEGACY_TIME)])
    )
    await old.append(
        "s1", Message("user", [TextBlock("and more"), TextBlock(LEGACY_TIME), TextBlock(todo)])
    )
    await old.append("s1", Message("assistant", [TextBlock("done: current plan")]))
    await old.create_session("v1", "main", "", origin="api")
    await old.append("v1", Message.user_text(LEGACY_NOTE + "\n\nBe brief."))
    await old.append("v1", Message("user", [TextBlock("what is a fjord"), TextBlock(LEGACY_TIME)]))
    legacy = await old.get_session("v1")
    assert legacy is not None and legacy.title == LEGACY_NOTE
    assert await old.search("current")
    await old.close()

    store = await TranscriptStore.open(path, control)
    try:
        # Only the assistant's own word is left to find.
        assert [(h.session, h.role) for h in await store.search("current")] == [("s1", "assistant")]
        assert await store.search("UTC") == [] and await store.search("bags") == []
        first, second, _ = await store.messages("s1")
        assert first.message.text == "pack for the coast"
        assert [b.kind for b in second.message.blocks if isinstance(b, ContextBlock)] == [
            "time",
            "todo",
        ]
        session = await store.get_session("s1")
        assert session is not None
        stored = await store.messages("s1")
        for fmt in ("md", "html", "json"):
            text = export_transcript(session, stored, fmt)
            assert "current time" not in text and "pack the bags" not in text, fmt
        titled = await store.get_session("v1")
        assert titled is not None and titled.title == "what is a fjord"
        # New rows copied from old ones (a fork) are indexed without the notes too.
        await store.fork("s1", "s2")
        assert {h.session for h in await store.search("UTC current")} == set()
        assert {h.session for h in await store.search("coast")} == {"s1", "s2"}
    finally:
        await store.close()


async def test_json_export_shows_the_notes_by_type_only(store: TranscriptStore) -> None:
    await store.create_session("s1", "main", "")
    await store.append("s1", Message("user", [TextBlock("hi"), ContextBlock(LEGACY_TIME, "time")]))
    session = await store.get_session("s1")
    assert session is not None
    body = json.loads(export_transcript(session, await store.messages("s1"), "json"))
    assert body["messages"][0]["blocks"] == [
        {"type": "text", "text": "hi"},
        {"type": "context", "kind": "time"},
    ]
