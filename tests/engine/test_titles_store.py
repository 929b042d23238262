"""The title's store side on SQLite and PostgreSQL: the job queued in the reply's own
transaction, once, and the generated title written only over a first-message one."""

from __future__ import annotations

import pytest

from habakkuk.engine.agent.titles import TITLE_KIND, title_job_id, title_queuing
from habakkuk.engine.llm.types import Message, TextBlock, ToolUseBlock
from habakkuk.engine.sessions import TranscriptStore


@pytest.fixture
def store(transcripts_on: TranscriptStore) -> TranscriptStore:
    return transcripts_on


async def _title_jobs(store: TranscriptStore) -> list[tuple[str, str]]:
    rows = await store.db.fetchall(
        "SELECT id, kind FROM control.jobs WHERE kind = ? ORDER BY id", (TITLE_KIND,)
    )
    return [(str(row["id"]), str(row["kind"])) for row in rows]


async def test_a_final_reply_queues_the_title_job_once_in_its_transaction(
    store: TranscriptStore,
) -> None:
    session = await store.create_session("s", "main", "PROMPT")
    await store.append("s", Message.user_text("Plan a trip to Lisbon"), turn_id="t1")
    asking = Message("assistant", [ToolUseBlock("c1", "web_search", {"q": "Lisbon"})])

    await store.append("s", asking, turn_id="t1", then=title_queuing(session, asking))
    assert await _title_jobs(store) == []  # a reply with tool calls is not the last
    final = Message("assistant", [TextBlock("Here is a plan.")])
    await store.append("s", final, turn_id="t1", then=title_queuing(session, final))
    await store.append("s", final, turn_id="t1", then=title_queuing(session, final))  # again

    assert await _title_jobs(store) == [(title_job_id("s"), TITLE_KIND)]


async def test_a_generated_title_replaces_only_a_first_message_title(
    store: TranscriptStore,
) -> None:
    await store.create_session("s", "main", "PROMPT")
    await store.append("s", Message.user_text("Plan a trip to Lisbon"), turn_id="t1")
    await store.create_session("mine", "main", "PROMPT")
    await store.append("mine", Message.user_text("Plan a trip to Porto"), turn_id="t2")
    await store.set_title("mine", "Porto", "user")

    written = await store.replace_first_message_title("s", "Lisbon Trip Plans")
    assert written is not None
    assert (written.title, written.title_source) == ("Lisbon Trip Plans", "generated")
    assert await store.replace_first_message_title("s", "Another One") is None
    assert await store.replace_first_message_title("mine", "Porto Trip Plans") is None
    kept = await store.get_session("mine")
    assert kept is not None and (kept.title, kept.title_source) == ("Porto", "user")
