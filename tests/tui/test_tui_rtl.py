"""Right-to-left text in the terminal: each drawn line in visual order, Arabic joined."""

from __future__ import annotations

import io

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from habakkuk.widgets.bidi import terminal_reorders, visual_strip, visual_text
from tests.helpers import eventually
from tests.tui.conftest import ChatApp
from tests.tui.markdown_views import screen_lines

# "مرحبا بالعالم" ("hello, world") as drawn: the words right to left, each letter in the
# form that joins it to its neighbours (meem final, lam initial, ..., meem initial).
HELLO_WORLD = "مرحبا بالعالم"
HELLO_WORLD_DRAWN = "\ufee2\ufedf\ufe8e\ufecc\ufedf\ufe8e\ufe91 \ufe8e\ufe92\ufea3\ufeae\ufee3"


@pytest.mark.parametrize(
    ("logical", "drawn"),
    [
        ("plain English (untouched) 1.5%", "plain English (untouched) 1.5%"),
        ("שלום עולם", "םלוע םולש"),
        # An English word in a Hebrew line keeps its own order; the line reads from the right.
        ("שלום hello עולם", "םלוע hello םולש"),
        ("hello שלום world", "hello םולש world"),
        # Numbers run left to right inside right-to-left text.
        ("עברית 1.5% ok", "ok 1.5% תירבע"),
        # Brackets around English in an Arabic line are mirrored with the line.
        ("مرحبا (hello) world", "world (hello) \ufe8e\ufe92\ufea3\ufeae\ufee3"),
        (HELLO_WORLD, HELLO_WORLD_DRAWN),
        # Lam-alef is one ligature; the line keeps its width with a space (on the left).
        ("لا", " \ufefb"),
    ],
)
def test_a_line_is_drawn_in_visual_order(logical: str, drawn: str) -> None:
    assert visual_text(logical) == drawn


def test_a_line_without_right_to_left_letters_is_the_same_strip() -> None:
    strip = Strip([Segment("hello world", Style(bold=True))])
    assert visual_strip(strip) is strip


def test_each_characters_style_moves_with_it() -> None:
    bold, plain = Style(bold=True), Style()
    strip = Strip([Segment("אב", bold), Segment(" ג", plain)])
    drawn = visual_strip(strip)
    assert [(s.text, s.style) for s in drawn] == [("ג ", plain), ("בא", bold)]
    assert drawn.cell_length == strip.cell_length


async def test_an_arabic_reply_is_drawn_right_to_left_and_joined(chat_app: ChatApp) -> None:
    async with chat_app(f'- text: "{HELLO_WORLD}"', size=(60, 16)) as ui:
        await ui.send("שלום hello")
        assert await ui.turn_finished() == "done"
        await eventually(
            lambda: any(HELLO_WORLD_DRAWN in line for line in screen_lines(ui.app)),
            what="the reply drawn in visual order",
        )
        lines = screen_lines(ui.app)
        [reply] = [line for line in lines if HELLO_WORLD_DRAWN in line]
        # A right-to-left paragraph ends at the right of its column, as it starts there.
        assert reply.rstrip().endswith(HELLO_WORLD_DRAWN)
        assert reply.index(HELLO_WORLD_DRAWN) > len(reply) // 2
        assert HELLO_WORLD not in "\n".join(lines)
        assert any("hello םולש" in line for line in lines)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_terminal_is_asked_not_to_reorder_again_while_the_app_runs() -> None:
    terminal = FakeTerminal()
    with terminal_reorders(terminal, False):
        assert terminal.getvalue() == "\x1b[8l"  # BDSM reset: explicit mode
    assert terminal.getvalue() == "\x1b[8l\x1b[8h"  # the default (implicit) back


def test_nothing_is_written_when_the_stream_is_not_a_terminal() -> None:
    piped = io.StringIO()
    with terminal_reorders(piped, False):
        pass
    assert piped.getvalue() == ""
