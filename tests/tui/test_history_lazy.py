"""A long stored session opens at its end with only the bottom mounted; older messages are
mounted as the reader scrolls up to them, in order, none lost or doubled."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widget import Widget

from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from habakkuk.engine.sessions import StoredMessage
from habakkuk.widgets.markdown_stream import StreamingMarkdown
from habakkuk.widgets.message_view import MOUNTED_WIDGETS, MessageView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage
from tests.helpers import eventually
from tests.tui.markdown_views import OneView, screen_lines, settled

TURNS = 80  # four messages and three widgets a turn: 240 widgets


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


async def opened(pilot: Pilot[Any]) -> MessageView:
    view = pilot.app.query_one(MessageView)
    await view.load("ses_1", transcript())
    await eventually(
        lambda: f"Answer {TURNS - 1} is here." in screen_text(pilot), what="the last answer"
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


async def test_scrolling_up_mounts_older_messages_in_order_none_lost_or_doubled() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        seen: set[str] = set()
        for _ in range(500):
            seen.update(screen_text(pilot).splitlines())
            if view.scroll_y <= 0 and not view.unmounted:
                break
            view.scroll_to(y=max(view.scroll_y - 10, 0), animate=False, immediate=True)
            app.screen._refresh_layout()
            before = [line[:-2] for line in screen_lines(app)]
            await settled(pilot)
            # Older widgets mounted above must not move what the reader looks at.
            assert [line[:-2] for line in screen_lines(app)] == before
        assert not view.unmounted
        assert shown(view) == expected()
        text = "\n".join(seen)
        for turn in range(TURNS):
            assert f"Question {turn}" in text and f"Answer {turn} is here." in text


async def test_home_in_a_long_session_shows_its_first_message() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        view.scroll_home(animate=False, immediate=True)
        await eventually(
            lambda: view.scroll_y == 0 and "Question 0" in screen_text(pilot), what="the top"
        )
        assert shown(view) == expected()
        # And back to the end.
        view.page("bottom")
        await eventually(
            lambda: f"Answer {TURNS - 1} is here." in screen_text(pilot), what="the end"
        )


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
