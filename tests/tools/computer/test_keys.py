"""Key combinations read once and spelled for xdotool, ydotool and macOS."""

from __future__ import annotations

import pytest

from habakkuk.tools.computer.keys import BadKey, KeyCombo, linux_codes, parse_combo
from habakkuk.tools.computer.macos import key_script


@pytest.mark.parametrize(
    ("text", "combo", "xdotool"),
    [
        ("Return", KeyCombo((), "Return"), "Return"),
        ("enter", KeyCombo((), "Return"), "Return"),
        ("ctrl+l", KeyCombo(("ctrl",), "l"), "ctrl+l"),
        ("Control+Shift+T", KeyCombo(("ctrl", "shift"), "T"), "ctrl+shift+T"),
        ("shift+ctrl+t", KeyCombo(("ctrl", "shift"), "t"), "ctrl+shift+t"),  # one order
        ("cmd+c", KeyCombo(("super",), "c"), "super+c"),
        ("alt+F4", KeyCombo(("alt",), "F4"), "alt+F4"),
        ("pgdn", KeyCombo((), "Page_Down"), "Page_Down"),
        ("ctrl+,", KeyCombo(("ctrl",), ","), "ctrl+comma"),
        ("ctrl++", KeyCombo(("ctrl",), "+"), "ctrl+plus"),
        ("+", KeyCombo((), "+"), "plus"),
        ("esc", KeyCombo((), "Escape"), "Escape"),
    ],
)
def test_combinations_are_read_and_spelled_for_xdotool(
    text: str, combo: KeyCombo, xdotool: str
) -> None:
    assert parse_combo(text) == combo
    assert combo.xdotool() == xdotool


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no key"),
        ("ctrl", "alone is a modifier"),
        ("hyper+x", "not a modifier"),
        ("ctrl+launchrocket", "unknown key"),
        ("F13", "unknown key"),
    ],
)
def test_what_is_no_key_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(BadKey, match=why):
        parse_combo(text)


def test_ydotool_presses_modifiers_first_by_linux_input_code() -> None:
    assert linux_codes(parse_combo("ctrl+l")) == [29, 38]
    assert linux_codes(parse_combo("Return")) == [28]
    assert linux_codes(parse_combo("A")) == [42, 30]  # a capital is shift+a
    assert linux_codes(parse_combo("ctrl+shift+?")) == [29, 42, 53]
    with pytest.raises(BadKey):
        linux_codes(parse_combo("é"))


def test_the_mac_key_script_takes_the_key_as_an_argument_and_only_fixed_modifiers() -> None:
    script = key_script(parse_combo("cmd+shift+t"))
    assert "keystroke (item 1 of argv) using {shift down, command down}" in script
    assert '"t"' not in script  # the key itself is never spliced into the script
    assert "key code (item 1 of argv as integer)" in key_script(parse_combo("Return"))
