"""kill -9 of the attending process mid-meeting: its dedicated Chromium does not outlive
it (counted from the process table), and the resumed attendance joins again and appends
to the same transcript without writing any line twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

from habakkuk.tools.meeting.attend import Attendance
from habakkuk.tools.meeting.record import LEFT, MeetingStore
from tests.helpers import eventually
from tests.tools.browser.conftest import needs_chromium

from .fake_meet import FakeMeet, fake_meet  # noqa: F401  # the fixture
from .test_attendance import EXPECTED, FAST, Browsers, lines_of, record

pytestmark = needs_chromium

ATTEND = """
import asyncio, sys
from pathlib import Path
from habakkuk.tools.meeting.attend import Attendance, AttendSettings
from habakkuk.tools.meeting.record import MeetingStore
from tests.tools.meeting.test_attendance import FAST, Browsers

store = MeetingStore(Path(sys.argv[1]))
asyncio.run(Attendance(store, Browsers(), FAST).attend(store.get(sys.argv[2])))
"""


def browsers_on(profile: Path) -> list[int]:
    """The processes whose command line names `profile` as their user data dir."""
    wanted = f"--user-data-dir={profile}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in command:
            found.append(int(entry.name))
    return found


async def test_kill_9_mid_meeting_leaves_no_browser_and_the_resumed_job_repeats_no_line(
    tmp_path: Path,
    fake_meet: FakeMeet,  # noqa: F811  # the fixture
) -> None:
    fake_meet.admitted = True
    store = MeetingStore(tmp_path / "meetings")
    meeting = record(store, fake_meet)
    root = Path(__file__).resolve().parents[3]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        textwrap.dedent(ATTEND),
        str(store.root),
        meeting.id,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    profile = store.dir_of(meeting.id) / "profile"
    try:
        await eventually(lambda: len(store.lines(meeting.id)) >= 3, what="three lines")
        assert browsers_on(profile)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
    await eventually(lambda: not browsers_on(profile), what="the orphaned browser gone")
    written = store.lines(meeting.id)
    resumed = store.get(meeting.id)
    assert resumed is not None and resumed.state == "in call"
    attending = asyncio.create_task(Attendance(store, Browsers(), FAST).attend(resumed))
    await eventually(lambda: fake_meet.captions_done >= 2, what="the captions played again")
    store.ask_to_leave(meeting.id)
    final = await asyncio.wait_for(attending, 60)
    assert final.state == LEFT and final.joined_at == resumed.joined_at
    assert store.lines(meeting.id)[: len(written)] == written  # appended, never rewritten
    assert lines_of(store, meeting) == EXPECTED
    assert not browsers_on(profile)
