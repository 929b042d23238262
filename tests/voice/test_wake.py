"""Wake phrases on transcripts: fillers, near misses, merged words, the follow-up window."""

from __future__ import annotations

import pytest

from habakkuk.voice.wake import Heard, WakeGate, edit_distance, match_wake, parse_phrases

HEY = parse_phrases("Hey Habakkuk")


def test_phrases_are_comma_separated_and_normalized() -> None:
    assert parse_phrases("Hey Habakkuk, OK  computer,, ") == ("hey habakkuk", "ok computer")


def test_edit_distance_counts_single_edits() -> None:
    assert edit_distance("habakkuk", "habakuk") == 1
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3


def test_the_rest_of_the_utterance_is_the_request() -> None:
    heard = match_wake("Hey Habakkuk, what's on my board?", HEY)
    assert heard == Heard("what's on my board?", woke=True)


@pytest.mark.parametrize(
    "transcript",
    [
        "hey habakuk what's on my board",  # one letter off
        "Hey, Habacuc! what's on my board",  # three off: a quarter of 12 characters
        "heyhabakkuk what's on my board",  # merged
        "hey haba kuk what's on my board",  # split
        "um, uh, hey habakkuk what's on my board",  # two fillers
    ],
)
def test_near_misses_and_fillers_still_wake(transcript: str) -> None:
    heard = match_wake(transcript, HEY)
    assert heard is not None and heard.request == "what's on my board"


@pytest.mark.parametrize(
    "transcript",
    [
        "hey hallelujah what's on my board",  # too far
        "um uh well so hey habakkuk what's up",  # four fillers
        "so I said hey habakkuk",  # not at the start
        "",
    ],
)
def test_other_speech_does_not_wake(transcript: str) -> None:
    assert match_wake(transcript, HEY) is None


def test_the_phrase_alone_wakes_with_no_request() -> None:
    assert match_wake("Hey Habakkuk.", HEY) == Heard("", woke=True)


def test_any_of_several_phrases_wakes() -> None:
    heard = match_wake("ok computer lights off", parse_phrases("hey habakkuk, ok computer"))
    assert heard == Heard("lights off", woke=True)


def test_follow_up_needs_no_phrase_until_the_window_closes() -> None:
    gate = WakeGate(HEY, follow_up_s=30.0)
    assert gate.hear("and tomorrow?", now=100.0) is None
    gate.replied(now=100.0)
    assert gate.hear("and tomorrow?", now=129.0) == Heard("and tomorrow?", woke=False)
    assert gate.hear("and tomorrow?", now=131.0) is None
    assert gate.hear("hey habakkuk and tomorrow?", now=131.0) == Heard("and tomorrow?", woke=True)


def test_without_phrases_every_utterance_is_a_request() -> None:
    gate = WakeGate((), follow_up_s=30.0)
    assert gate.hear(" what time is it ", now=0.0) == Heard("what time is it", woke=False)
    assert gate.hear("  ", now=0.0) is None
