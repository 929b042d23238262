"""A meeting job in the serving runtime's pool: the notes written once by one model call
and sent once to the asking chat (a delivery job whose id derives from the meeting)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from habakkuk.engine.llm.provider import ProviderError
from habakkuk.tools.meeting.kind import MEETING_KIND, MeetingRun, delivery_id_of, job_id_of
from habakkuk.tools.meeting.notes import transcript_text, write_notes
from habakkuk.tools.meeting.record import FAILED, LEFT, QUEUED, Line, Meeting, MeetingStore
from tests.conftest import mock_config
from tests.helpers import eventually

SCRIPT = """
- text: "## Summary\\nThe budget was approved.\\n## Decisions\\nShip in May."
"""


def over(store: MeetingStore, joined: bool = True) -> Meeting:
    meeting = Meeting(
        id="mtg_00000000000000bb",
        url="https://meet.google.com/abc-defg-hij",
        platform="meet",
        agent="main",
        name="Notes",
        origin="telegram:42",
        session="ses_1",
        created=time.time(),
        duration_limit=3600,
        state=LEFT,
        reason="asked to leave" if joined else "nobody let Habakkuk in from the lobby",
        joined_at=time.time() if joined else None,
    )
    store.create(meeting)
    return meeting


async def test_the_notes_are_written_once_and_sent_once_to_the_asking_chat(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config(SCRIPT))
    store = MeetingStore(runtime.home.root / "meetings")
    meeting = over(store)
    store.append_lines(meeting.id, [Line("Ann", "The budget is approved", 1.0)])
    runtime.start_workers(maintenance=True)
    await runtime.queue.enqueue(job_id_of(meeting.id), MEETING_KIND, MeetingRun(meeting.id))
    await eventually(
        lambda: (store.get(meeting.id) or meeting).delivered, what="the notes delivered"
    )
    notes = (store.dir_of(meeting.id) / "notes.md").read_text(encoding="utf-8")
    assert "The budget was approved." in notes
    delivery = await runtime.queue.get(delivery_id_of(meeting.id))
    assert delivery is not None and "The budget was approved." in str(delivery.payload)
    done = store.get(meeting.id)
    assert done is not None and done.notes and done.delivered
    # The job run again (a resumed attendance) neither asks the model nor sends again.
    (store.dir_of(meeting.id) / "notes.md").write_text("kept", encoding="utf-8")
    await runtime.queue.enqueue(
        job_id_of(meeting.id) + ":again", MEETING_KIND, MeetingRun(meeting.id)
    )
    await eventually(
        lambda: _finished(runtime, job_id_of(meeting.id) + ":again"), what="the second run"
    )
    assert (store.dir_of(meeting.id) / "notes.md").read_text(encoding="utf-8") == "kept"


async def _finished(runtime: Any, job_id: str) -> bool:
    job = await runtime.queue.get(job_id)
    return job is not None and job.status == "done"


async def test_notes_of_a_meeting_never_joined_say_why(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config(SCRIPT))
    store = MeetingStore(runtime.home.root / "meetings")
    meeting = over(store, joined=False)
    runtime.start_workers(maintenance=True)
    await runtime.queue.enqueue(job_id_of(meeting.id), MEETING_KIND, MeetingRun(meeting.id))
    await eventually(
        lambda: (store.get(meeting.id) or meeting).delivered, what="the notes delivered"
    )
    notes = (store.dir_of(meeting.id) / "notes.md").read_text(encoding="utf-8")
    assert "did not get into the meeting: nobody let Habakkuk in from the lobby" in notes


def test_a_long_transcript_keeps_its_start_and_its_end() -> None:
    lines = [Line("Ann", f"line {i} " + "x" * 90, float(i)) for i in range(10_000)]
    text = transcript_text(lines, limit=10_000)
    assert text.startswith("Ann: line 0 ") and "line 9999" in text
    assert "left out" in text and len(text) < 10_100


async def test_when_the_model_fails_the_notes_say_so_and_point_to_the_transcript(
    tmp_path: Path,
) -> None:
    store = MeetingStore(tmp_path / "meetings")
    meeting = over(store)
    store.append_lines(meeting.id, [Line("Ann", "The budget is approved", 1.0)])
    asked: list[str] = []

    async def failing(system: str, text: str) -> str:
        asked.append(text)
        raise ProviderError("overloaded", "the provider is overloaded")

    done = await write_notes(store, meeting, failing)
    notes = (store.dir_of(meeting.id) / "notes.md").read_text(encoding="utf-8")
    assert "could not be written" in notes and f"meeting_transcript id {meeting.id}" in notes
    assert done.notes and len(asked) == 1
    assert "Ann: The budget is approved" in asked[0]
    assert await write_notes(store, done, failing) == done and len(asked) == 1  # once


async def test_an_attendance_whose_browser_never_starts_sends_notes_saying_why_once(
    runtime_factory: Any,
) -> None:
    extra = "browser:\n  binary: /nonexistent/chromium\n"
    runtime = await runtime_factory(mock_config(SCRIPT, extra=extra))
    store = MeetingStore(runtime.home.root / "meetings")
    meeting = replace(over(store, joined=False), id="mtg_00000000000000cc", state=QUEUED)
    store.create(meeting)
    runtime.start_workers(maintenance=True)
    await runtime.queue.enqueue(
        job_id_of(meeting.id), MEETING_KIND, MeetingRun(meeting.id), max_attempts=1
    )
    await eventually(
        lambda: (store.get(meeting.id) or meeting).delivered, what="the notes delivered"
    )
    done = store.get(meeting.id)
    assert done is not None and (done.state, done.reason) == (
        FAILED,
        "no browser found: install chromium, or set browser.binary",
    )
    notes = (store.dir_of(meeting.id) / "notes.md").read_text(encoding="utf-8")
    assert "did not get into the meeting: no browser found" in notes
    delivery = await runtime.queue.get(delivery_id_of(meeting.id))
    assert delivery is not None and "no browser found" in str(delivery.payload)
    assert await _finished(runtime, job_id_of(meeting.id))
