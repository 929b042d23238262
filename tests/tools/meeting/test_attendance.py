"""An attendance in a real Chromium (headless) against a page on 127.0.0.1 imitating
Google Meet: joining as a named guest through pre-join and the lobby, captions on and
read by the observer into transcript.jsonl, leaving on request; a browser killed mid-call
replaced and the call joined again; an attendance cut off and resumed (as after kill -9)
writing no line twice."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from habakkuk.tools.browser.fleet import launch_browser
from habakkuk.tools.browser.guard import UrlGuard
from habakkuk.tools.browser.session import Browser
from habakkuk.tools.meeting.attend import Attendance, AttendSettings
from habakkuk.tools.meeting.record import ENDED, LEFT, Meeting, MeetingStore
from tests.helpers import eventually
from tests.tools.browser.conftest import CHROMIUM, needs_chromium

from .fake_meet import FakeMeet, fake_meet  # noqa: F401  # the fixture

pytestmark = needs_chromium
FAST = AttendSettings(step=0.2, join_step=0.2, quiet=30.0, captions_retry=5.0)
EXPECTED = [
    ("Ann", "Hello everyone, welcome to the review"),
    ("Bob", "Thanks Ann, the numbers are in"),
    # Said in the call, in the words of a page the call left: captions never decide a state.
    ("Cy", "You left the meeting, says the page"),
]


class Browsers:
    """Dedicated browsers for the attendances, as serve launches them (the guard lets
    127.0.0.1 through, as browser.allow_private would)."""

    def __init__(self) -> None:
        self.started: list[Browser] = []

    async def __call__(self, profile: Path, flags: tuple[str, ...]) -> Browser:
        assert CHROMIUM is not None
        guard = UrlGuard(allow_private=["127.0.0.1"])
        browser = await launch_browser(CHROMIUM, profile, guard, headless=True, extra_args=flags)
        self.started.append(browser)
        return browser


def record(store: MeetingStore, meet: FakeMeet) -> Meeting:
    meeting = Meeting(
        id="mtg_00000000000000aa",
        url=meet.url,
        platform=meet.platform,
        agent="main",
        name="Notes Bot",
        origin="telegram:42",
        session="ses_1",
        created=time.time(),
        duration_limit=3600,
    )
    store.create(meeting)
    return meeting


def lines_of(store: MeetingStore, meeting: Meeting) -> list[tuple[str, str]]:
    return [(line.speaker, line.text) for line in store.lines(meeting.id)]


@pytest.mark.parametrize("platform", ["meet", "zoom", "teams"])
async def test_a_guest_joins_through_the_lobby_reads_captions_and_leaves_on_request(
    platform: str,
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    fake_meet.platform = platform
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    browsers = Browsers()
    attending = asyncio.create_task(Attendance(store, browsers, FAST).attend(meeting))
    await eventually(lambda: fake_meet.joins, what="the guest asked to join")
    assert fake_meet.joins == ["Notes Bot"]
    assert "Chrome/" in fake_meet.agents[0] and "Headless" not in fake_meet.agents[0]
    assert sorted(fake_meet.toggles) == ["cam=false", "mic=false"]  # each pressed once
    await eventually(lambda: store.get(meeting.id).state == "lobby", what="waiting in the lobby")  # type: ignore[union-attr]  # the record exists
    fake_meet.admitted = True
    await eventually(lambda: fake_meet.captions_done, what="the captions played")
    await eventually(lambda: len(store.lines(meeting.id)) >= 3, what="three finished lines")
    assert lines_of(store, meeting) == EXPECTED
    await eventually(lambda: fake_meet.chat, what="the note-taker's greeting")
    assert fake_meet.chat == ["Notes Bot has joined to take notes."]
    store.ask_to_leave(meeting.id)
    final = await asyncio.wait_for(attending, 60)
    assert (final.state, final.reason) == (LEFT, "asked to leave")
    assert final.joined_at is not None and fake_meet.left == 1
    assert lines_of(store, meeting) == EXPECTED
    assert all(not b.alive for b in browsers.started)  # the dedicated browser is closed


async def test_a_browser_killed_mid_call_is_replaced_and_no_line_is_written_twice(
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    fake_meet.admitted = True
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    browsers = Browsers()
    attending = asyncio.create_task(Attendance(store, browsers, FAST).attend(meeting))
    await eventually(lambda: len(store.lines(meeting.id)) >= 3, what="three finished lines")
    first = browsers.started[0]
    assert first.pid is not None
    os.killpg(first.pid, signal.SIGKILL)
    await eventually(lambda: fake_meet.captions_done >= 2, what="the call joined again")
    await eventually(lambda: len(fake_meet.joins) >= 2, what="a second join")
    store.ask_to_leave(meeting.id)
    final = await asyncio.wait_for(attending, 60)
    assert final.state == LEFT and len(browsers.started) == 2
    assert lines_of(store, meeting) == EXPECTED  # the replayed captions were not written again


async def test_an_attendance_cut_off_and_resumed_appends_without_repeating_lines(
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    fake_meet.admitted = True
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    browsers = Browsers()
    first = asyncio.create_task(Attendance(store, browsers, FAST).attend(meeting))
    await eventually(lambda: len(store.lines(meeting.id)) >= 3, what="three finished lines")
    first.cancel()  # the process stopped: its lease expires, another run resumes the job
    with pytest.raises(asyncio.CancelledError):
        await first
    resumed_from = store.get(meeting.id)
    assert resumed_from is not None and resumed_from.joined_at is not None
    second = asyncio.create_task(Attendance(store, browsers, FAST).attend(resumed_from))
    await eventually(lambda: fake_meet.captions_done >= 2, what="the captions played again")
    await eventually(lambda: len(fake_meet.joins) >= 2, what="joined again")
    store.ask_to_leave(meeting.id)
    final = await asyncio.wait_for(second, 60)
    assert final.state == LEFT
    assert final.joined_at == resumed_from.joined_at  # the time limit counts from the first join
    assert lines_of(store, meeting) == EXPECTED


@pytest.mark.parametrize("platform", ["meet", "zoom", "teams"])
async def test_an_attendance_stops_when_the_host_ends_the_call(
    platform: str,
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    fake_meet.platform, fake_meet.admitted = platform, True
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    attending = asyncio.create_task(Attendance(store, Browsers(), FAST).attend(meeting))
    await eventually(lambda: len(store.lines(meeting.id)) >= 3, what="three finished lines")
    fake_meet.ended = True
    final = await asyncio.wait_for(attending, 60)
    assert (final.state, final.reason) == (ENDED, "the call ended")
    assert fake_meet.left == 0  # nothing to leave
    assert lines_of(store, meeting) == EXPECTED


async def test_an_attendance_leaves_at_its_time_limit(
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    fake_meet.admitted = True
    store = MeetingStore(tmp_path / "meetings")
    meeting = store.update(record(store, fake_meet), duration_limit=0.5)
    final = await asyncio.wait_for(Attendance(store, Browsers(), FAST).attend(meeting), 60)
    assert (final.state, final.reason) == (LEFT, "the time limit passed")
    assert fake_meet.left == 1


async def test_a_guest_nobody_lets_in_fails_at_the_lobby_timeout(
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    settings = replace(FAST, lobby_timeout=1.0)
    final = await asyncio.wait_for(Attendance(store, Browsers(), settings).attend(meeting), 60)
    assert (final.state, final.reason) == ("failed", "nobody let Habakkuk in from the lobby")
    assert final.joined_at is None and store.lines(meeting.id) == []
