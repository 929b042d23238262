"""The `meeting:` section obeyed by a real attendance (headless Chromium against the local
Meet imitation): a short lobby_timeout fails the wait, announce: false posts no greeting."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.tools.meeting.attend import Attendance
from habakkuk.tools.meeting.record import LEFT, MeetingStore
from habakkuk.work.meeting_runs import attend_settings
from tests.helpers import eventually
from tests.tools.browser.conftest import needs_chromium

from .fake_meet import FakeMeet, fake_meet  # noqa: F401  # the fixture
from .test_attendance import FAST, Browsers, record

pytestmark = needs_chromium
BASE = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"


async def test_a_short_lobby_timeout_from_config_ends_the_wait(
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    config = parse_config(
        BASE + "meeting:\n  lobby_timeout: 1s\n", tmp_path / "config.yaml", Home(tmp_path)
    )
    configured = attend_settings(config)
    settings = replace(FAST, lobby_timeout=configured.lobby_timeout)
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    final = await asyncio.wait_for(Attendance(store, Browsers(), settings).attend(meeting), 60)
    assert (final.state, final.reason) == ("failed", "nobody let Habakkuk in from the lobby")
    assert fake_meet.joins == ["Notes Bot"] and final.joined_at is None


async def test_announce_false_posts_no_greeting_in_the_meeting_chat(
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    config = parse_config(
        BASE + "meeting:\n  announce: false\n", tmp_path / "config.yaml", Home(tmp_path)
    )
    settings = replace(FAST, announce=attend_settings(config).announce)
    fake_meet.admitted = True
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    attending = asyncio.create_task(Attendance(store, Browsers(), settings).attend(meeting))
    # The greeting would go out in the first step in the call, before captions are read.
    await eventually(lambda: len(store.lines(meeting.id)) >= 3, what="three finished lines")
    store.ask_to_leave(meeting.id)
    final = await asyncio.wait_for(attending, 60)
    assert final.state == LEFT
    assert fake_meet.chat == []
