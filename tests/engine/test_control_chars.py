"""The one check of control characters below memory and the board (engine/control_chars)."""

from __future__ import annotations

import pytest

from habakkuk.engine.control_chars import find_control, refuse_controls, without_controls
from habakkuk.engine.errors import HabakkukError

REFUSED = ["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x1f", "\x7f", "\x9b",
           "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
           "\u2069"]  # fmt: skip
ALLOWED = "tab\there, lines\nand\r\nbreaks, RTL marks \u200e\u200f\u061c, emoji 🙂, é ß 中文"


@pytest.mark.parametrize("char", REFUSED)
def test_each_refused_character_is_named_with_its_place(char: str) -> None:
    found = find_control(f"ab\ncd{char}ef")
    assert found is not None and (found.char, found.index, found.line, found.column) == (
        char,
        5,
        2,
        3,
    )
    with pytest.raises(HabakkukError) as refused:
        refuse_controls(f"ab\ncd{char}ef", "memory: the content")
    message = str(refused.value)
    assert message.startswith(f"memory: the content has the control character U+{ord(char):04X} (")
    assert "at line 2, column 3" in message and "\n" not in message and char not in message


def test_the_names_and_the_position_on_one_line() -> None:
    with pytest.raises(HabakkukError, match=r"U\+0000 \(NUL\) at position 4;"):
        refuse_controls("abc\x00", "board: the title")
    with pytest.raises(HabakkukError, match=r"U\+202E \(RIGHT-TO-LEFT OVERRIDE\)"):
        refuse_controls("txt.\u202eexe", "board: the title")
    with pytest.raises(HabakkukError, match=r"U\+009B \(C1 control\)"):
        refuse_controls("\x9b2J", "board: the title")


def test_tabs_line_breaks_and_right_to_left_marks_pass() -> None:
    assert find_control(ALLOWED) is None
    refuse_controls(ALLOWED, "memory: the content")


def test_a_persons_own_words_are_stripped_not_refused() -> None:
    assert without_controls("call \u202eMom\u202c at 5\x00") == "call Mom at 5"
    assert without_controls(ALLOWED) == ALLOWED
