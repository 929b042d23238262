"""A long stored session opens at its end with only the bottom mounted; a bounded window of
it is mounted as the reader scrolls or jumps (Home, End), in order, none lost or doubled."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widget import Widget

from habakkuk.engine.events import TurnEnded, TurnText
from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from habakkuk.engine.sessions import StoredMessage
from habakkuk.widgets.markdown_stream import StreamingMarkdown
from habakkuk.widgets.message_view import MOUNTED_WIDGETS, WINDOW_LIMIT, MessageView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage
from tests.helpers import eventually
from tests.tui.conftest import TurnIds
from tests.tui.markdown_views import OneView, screen_lines, settled

TURNS = 80  # four messages and three widgets a turn: 240 widgets
SCROLLED_TURNS = 60


def turn_messages(turn: int) -> list[Message]:
    """A question, a reply calling a tool, the tool's result and the answer."""
    call = f"call_{turn}"
    return [
        Message("user", [TextBlock(f"Question {turn}")]),
        Message(
            "assistant",
            [ToolUseBlock(call, "read_file", {"path": f"file{turn}.md"})],
        ),
        Message("user", [ToolResultBlock(call, f"contents of file {turn}")]),
        Message("assistant", [TextBlock(f"Answer {turn} is here.")]),
    ]


def transcript(turns: int = TURNS, prefix: str = "") -> list[StoredMessage]:
    messages: list[StoredMessage] = []
    for turn in range(turns):
        for message in turn_messages(turn):
            if prefix:
                message.blocks = [
                    TextBlock(prefix + b.text) if isinstance(b, TextBlock) else b
                    for b in message.blocks
                ]
            messages.append(StoredMessage(len(messages), message, f"turn_{turn}", 0.0, []))
    return messages


def label(widget: Widget) -> str:
    """What a widget of the conversation stands for, to compare orders."""
    if isinstance(widget, UserMessage):
        return widget.text
    if isinstance(widget, StreamingMarkdown):
        return widget.text
    if isinstance(widget, ToolCard):
        return widget.call_id
    return type(widget).__name__


def expected(turns: int = TURNS, prefix: str = "") -> list[str]:
    labels: list[str] = []
    for turn in range(turns):
        labels += [f"{prefix}Question {turn}", f"call_{turn}", f"{prefix}Answer {turn} is here."]
    return labels


def shown(view: MessageView) -> list[str]:
    return [label(w) for w in view.children]


def screen_text(pilot: Pilot[Any]) -> str:
    return "\n".join(screen_lines(pilot.app))


async def opened(pilot: Pilot[Any], turns: int = TURNS) -> MessageView:
    view = pilot.app.query_one(MessageView)
    await view.load("ses_1", transcript(turns))
    await eventually(
        lambda: f"Answer {turns - 1} is here." in screen_text(pilot), what="the last answer"
    )
    await settled(pilot)
    return view


async def test_a_long_session_opens_at_its_end_with_only_the_bottom_mounted() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        # The bottom batch, and more while it was within reach of the top.
        assert view.unmounted > 0 and view.unmounted % MOUNTED_WIDGETS == 0
        assert shown(view) == expected()[view.unmounted :]
        assert view.is_vertical_scroll_end


def in_window(view: MessageView, turns: int = TURNS) -> None:
    """What is mounted is the window's slice of the transcript, in order, none doubled,
    and no more than the window holds."""
    lo, hi = view.window
    assert shown(view) == expected(turns)[lo:hi]
    assert len(view.children) <= WINDOW_LIMIT + MOUNTED_WIDGETS


async def scroll_through(
    pilot: Pilot[Any], view: MessageView, direction: int, turns: int = TURNS
) -> list[str]:
    """Scroll a page at a time (up for a negative `direction`) to the far end of the
    transcript; the screen at each step, in order. What the reader looks at never moves
    when the window changes.

    A page less one line: consecutive screens share a line, so every line of the
    transcript is on one of them (a smaller step only repeats lines, at a layout pass
    and six settling passes a step)."""
    step = direction * (view.size.height - 1)
    assert step
    pages: list[str] = []
    for _ in range(1000):
        pages.append("\n".join(line + " " for line in screen_lines(pilot.app)))
        in_window(view, turns)
        if step < 0 and view.scroll_y <= 0 and view.window[0] == 0:
            return pages
        if step > 0 and view.is_vertical_scroll_end and view.at_end:
            return pages
        target = min(max(view.scroll_y + step, 0), view.max_scroll_y)
        view.scroll_to(y=target, animate=False, immediate=True)
        pilot.app.screen._refresh_layout()
        before = [line[:-2] for line in screen_lines(pilot.app)]
        await settled(pilot)
        assert [line[:-2] for line in screen_lines(pilot.app)] == before
    raise AssertionError("the far end was never reached")


def first_seen(pages: list[str], needles: list[str]) -> list[int]:
    """On which page each needle first shows (-1: never)."""
    return [next((i for i, page in enumerate(pages) if n in page), -1) for n in needles]


async def test_scrolling_up_then_down_shows_every_message_once_in_order() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        # 180 widgets: more than the window holds (WINDOW_LIMIT and a batch), so its far
        # end must go on the way up and come back on the way down.
        assert 3 * SCROLLED_TURNS > WINDOW_LIMIT + MOUNTED_WIDGETS
        view = await opened(pilot, SCROLLED_TURNS)
        up = await scroll_through(pilot, view, -1, SCROLLED_TURNS)
        # The window's far end went: it did not mount the whole transcript on the way.
        assert view.unmounted > 0 and view.window[0] == 0
        down = await scroll_through(pilot, view, 1, SCROLLED_TURNS)
        questions = [f"Question {turn} " for turn in range(SCROLLED_TURNS)]
        # Every question was on screen, in order both ways.
        seen_up = first_seen(up, list(reversed(questions)))
        seen_down = first_seen(down, questions)
        assert -1 not in seen_up and seen_up == sorted(seen_up)
        assert -1 not in seen_down and seen_down == sorted(seen_down)
        assert view.window[1] == len(expected(SCROLLED_TURNS)) and view.is_anchored


async def test_home_in_a_long_session_shows_its_first_message() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        view.scroll_home(animate=False, immediate=True)
        await eventually(
            lambda: view.scroll_y == 0 and "Question 0" in screen_text(pilot), what="the top"
        )
        # The first batch (and what grows below it), not the whole transcript.
        assert view.window[0] == 0 and view.unmounted > 0
        in_window(view)
        # And back to the end.
        view.page("bottom")
        await eventually(
            lambda: f"Answer {TURNS - 1} is here." in screen_text(pilot), what="the end"
        )
        await settled(pilot)
        assert view.at_end and view.is_vertical_scroll_end
        in_window(view)


async def test_a_reply_arriving_while_the_reader_is_at_the_top_does_not_move_them() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        view.scroll_home(animate=False, immediate=True)
        await eventually(
            lambda: view.scroll_y == 0 and "Question 0" in screen_text(pilot), what="the top"
        )
        await settled(pilot)
        # The scroll bar's column aside (the content below grew).
        before = [line[:-2] for line in screen_lines(app)]
        live = TurnIds(session="ses_1", turn="turn_live")
        await view.handle(TurnText(**live, text="A new reply streams in."))
        await view.handle(TurnEnded(**live, status="stopped"))
        await settled(pilot)
        assert [line[:-2] for line in screen_lines(app)] == before and view.scroll_y == 0
        # At the end it follows the last stored answer.
        view.page("bottom")
        await eventually(lambda: "Turn stopped." in screen_text(pilot), what="the note at the end")
        await settled(pilot)
        labels = shown(view)
        assert labels[-3:] == [f"Answer {TURNS - 1} is here.", "A new reply streams in.", "Notice"]


async def test_a_card_mounted_late_shows_its_calls_outcome() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        assert "call_0" not in view.cards  # not made yet
        view.scroll_home(animate=False, immediate=True)
        await eventually(lambda: "call_0" in view.cards, what="the first card")
        card = view.cards["call_0"]
        assert card.status == "ok" and card.preview == "contents of file 0"


async def test_loading_another_session_drops_the_first_ones_older_messages() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        # Near the top: a batch of the first session's older widgets is queued...
        view.scroll_to(y=0, animate=False, immediate=True)
        # ...and another session is opened before it mounts.
        await view.load("ses_2", transcript(10, prefix="B "))
        await settled(pilot)
        await eventually(lambda: "B Answer 9 is here." in screen_text(pilot), what="B's end")
        assert shown(view) == expected(10, prefix="B ")
        assert not view.unmounted
