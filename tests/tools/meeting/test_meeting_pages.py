"""Classify: each platform's page states told apart by text and labels, never by what
people said (captions and chat are cut out of the probe before it is classified)."""

from __future__ import annotations

import pytest

from habakkuk.tools.meeting.patterns import (
    DENIED,
    ENDED,
    IN_CALL,
    INVALID,
    LAUNCHER,
    LOBBY,
    PLATFORMS,
    PRE_JOIN,
    UNKNOWN,
    Probe,
    classify,
)


@pytest.mark.parametrize(
    ("platform", "probe", "state"),
    [
        ("meet", Probe(buttons=("Ask to join", "Turn off microphone")), PRE_JOIN),
        ("meet", Probe(text="Asking to be let in..."), LOBBY),
        ("meet", Probe(buttons=("Leave call", "Turn on captions")), IN_CALL),
        ("meet", Probe(text="You can't join this call"), DENIED),
        ("meet", Probe(text="The call has ended"), ENDED),
        ("meet", Probe(text="Check your meeting code"), INVALID),
        ("zoom", Probe(buttons=("Join from Your Browser",)), LAUNCHER),
        ("zoom", Probe(buttons=("Join", "Mute", "Stop Video")), PRE_JOIN),
        ("zoom", Probe(text="Please wait, the meeting host will let you in soon."), LOBBY),
        ("zoom", Probe(buttons=("Leave", "Chat")), IN_CALL),
        ("zoom", Probe(text="This meeting has been ended by host"), ENDED),
        ("zoom", Probe(text="Invalid meeting ID"), INVALID),
        ("teams", Probe(buttons=("Continue on this browser",)), LAUNCHER),
        ("teams", Probe(buttons=("Join now", "Microphone [on]")), PRE_JOIN),
        ("teams", Probe(text="Someone in the meeting should let you in soon"), LOBBY),
        ("teams", Probe(buttons=("Leave", "More")), IN_CALL),
        ("teams", Probe(text="Sorry, but you were denied access to the meeting"), DENIED),
        ("teams", Probe(text="You've been removed from this meeting"), ENDED),
        ("teams", Probe(title="Teams", text="Loading"), UNKNOWN),
    ],
)
def test_each_platforms_states_are_told_apart(platform: str, probe: Probe, state: str) -> None:
    assert classify(PLATFORMS[platform], probe) == state


def test_a_page_in_the_call_stays_in_the_call_whatever_is_said_in_it() -> None:
    # The probe never holds captions or chat, so "the call has ended" said aloud is not
    # in its text; the controls say the call goes on.
    probe = Probe(text="Weekly review", buttons=("Leave call",), captions=True)
    assert classify(PLATFORMS["meet"], probe) == IN_CALL
