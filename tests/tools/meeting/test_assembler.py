"""The Assembler: caption block updates in, finished transcript lines out (pure)."""

from __future__ import annotations

from habakkuk.tools.meeting.assembler import Assembler
from habakkuk.tools.meeting.record import Line


def texts(lines: list[Line]) -> list[tuple[str, str]]:
    return [(line.speaker, line.text) for line in lines]


def test_a_growing_block_is_one_line_finished_when_removed_with_its_first_time() -> None:
    a = Assembler()
    assert a.update(1, "Ann", "Hello every", 10.0) == []
    assert a.update(1, "Ann", "Hello everyone, we", 11.0) == []
    assert a.update(1, "Ann", "Hello everyone, welcome to the review", 12.0) == []
    finished = a.remove(1)
    assert texts(finished) == [("Ann", "Hello everyone, welcome to the review")]
    assert finished[0].at == 10.0


def test_revised_last_words_replace_the_earlier_guess() -> None:
    a = Assembler()
    a.update(1, "Ann", "we ship on Monday the fist", 0.0)
    a.update(1, "Ann", "we ship on Monday the first of May", 1.0)
    assert texts(a.remove(1)) == [("Ann", "we ship on Monday the first of May")]


def test_a_start_that_scrolled_away_is_kept() -> None:
    a = Assembler()
    a.update(1, "Bob", "one two three four five six", 0.0)
    a.update(1, "Bob", "four five six seven eight", 1.0)
    assert texts(a.remove(1)) == [("Bob", "one two three four five six seven eight")]


def test_a_block_reused_for_another_sentence_finishes_the_first() -> None:
    a = Assembler()
    a.update(1, "Ann", "Thanks", 0.0)
    finished = a.update(1, "Ann", "Completely different words here", 1.0)
    assert texts(finished) == [("Ann", "Thanks")]
    assert texts(a.remove(1)) == [("Ann", "Completely different words here")]


def test_another_speaker_in_the_same_block_finishes_the_line() -> None:
    a = Assembler()
    a.update(1, "Ann", "Shall we start", 0.0)
    assert texts(a.update(1, "Bob", "Shall we start now", 1.0)) == [("Ann", "Shall we start")]


def test_a_block_unchanged_for_five_seconds_is_finished() -> None:
    a = Assembler()
    a.update(1, "Ann", "the budget is approved", 0.0)
    assert a.tick(4.9) == []
    assert texts(a.tick(5.0)) == [("Ann", "the budget is approved")]
    assert a.remove(1) == []  # finished once


def test_a_finished_line_that_repeats_or_lies_inside_a_recent_one_is_dropped() -> None:
    a = Assembler()
    a.update(1, "Ann", "The budget is approved.", 0.0)
    assert len(a.remove(1)) == 1
    a.update(2, "Ann", "the budget is approved", 1.0)
    assert a.remove(2) == []
    a.update(3, "Ann", "budget is", 2.0)
    assert a.remove(3) == []
    a.update(4, "Bob", "the budget is approved", 3.0)  # another speaker may say it too
    assert texts(a.remove(4)) == [("Bob", "the budget is approved")]


def test_a_line_that_went_on_after_its_quiet_finish_writes_only_the_rest() -> None:
    a = Assembler()
    a.update(1, "Ann", "first we review the numbers", 0.0)
    assert len(a.tick(6.0)) == 1
    a.update(2, "Ann", "first we review the numbers and then the plan", 7.0)
    assert texts(a.remove(2)) == [("Ann", "and then the plan")]


def test_a_seeded_assembler_does_not_write_captions_already_written() -> None:
    a = Assembler()
    a.seed([Line("Ann", "We agreed on the plan.", 0.0)])
    a.update(1, "Ann", "We agreed on the plan", 50.0)
    assert a.remove(1) == []
    a.update(2, "Ann", "Next item", 51.0)
    assert texts(a.flush()) == [("Ann", "Next item")]
