"""`habakkuk meetings [list|leave ID]`: the home's meetings, and the leave file."""

from __future__ import annotations

import time

import pytest

from habakkuk.cli.entry import main
from habakkuk.engine.home import Home
from habakkuk.tools.meeting.record import ENDED, Meeting, MeetingStore


def meeting(store: MeetingStore, suffix: str, state: str = "in call") -> Meeting:
    found = Meeting(
        id=f"mtg_00000000000000{suffix}",
        url="https://meet.google.com/abc-defg-hij",
        platform="meet",
        agent="main",
        name="Notes",
        origin="",
        session="ses_1",
        created=time.time(),
        duration_limit=3600,
        state=state,
    )
    store.create(found)
    return found


def test_list_shows_each_meeting_and_leave_writes_the_leave_file(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    store = MeetingStore(home.root / "meetings")
    assert main(["meetings"]) == 0
    assert "no meetings yet" in capsys.readouterr().err
    live = meeting(store, "01")
    done = meeting(store, "02", state=ENDED)
    assert main(["meetings", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{live.id} meet" in out and "state: in call" in out and "state: ended" in out
    assert main(["meetings", "leave", live.id]) == 0
    assert f"asked meeting {live.id} to leave" in capsys.readouterr().out
    assert store.leave_asked(live.id)
    assert main(["meetings", "leave", done.id]) == 0
    assert "is over already (ended)" in capsys.readouterr().out
    assert not store.leave_asked(done.id)


def test_leaving_an_unknown_meeting_is_one_line(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["meetings", "leave", "mtg_nope"]) == 1
    assert capsys.readouterr().err.strip() == "habakkuk: meetings: no such meeting mtg_nope"
    assert main(["meetings", "leave"]) == 1
    assert "name the meeting" in capsys.readouterr().err
