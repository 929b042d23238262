"""Long replies loaded from history are built lazily: only what is near view has blocks."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock

from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from habakkuk.engine.sessions import StoredMessage
from habakkuk.widgets.markdown_stream import (
    PICTURE_SCREENS,
    StreamingMarkdown,
)
from habakkuk.widgets.message_view import MessageView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage
from tests.helpers import eventually
from tests.tui.markdown_views import OneView, screen_lines, settled, volumes
from tests.tui.test_tui_streaming import signature

REPLIES = 6
SCROLLED_REPLIES = 3
PARAGRAPHS = 60


def reply(number: int) -> str:
    """A long reply: paragraphs, a fence, a list, a table and a reference link."""
    parts = [f"## Reply {number}\n"]
    for i in range(PARAGRAPHS):
        parts.append(f"Paragraph {i} of reply {number}, long enough to wrap on a narrow screen.\n")
        if i % 9 == 0:
            parts.append("```python\nprint('block')\n```\n")
        if i % 13 == 0:
            parts.append("- item one\n- item two\n")
        if i % 17 == 0:
            parts.append("| a | b |\n|---|---|\n| 1 | 2 |\n")
        if i % 19 == 0:
            parts.append("A [reference link][docs] here.\n")
    parts.append(f"End of reply {number}.\n\n[docs]: https://example.com/docs\n")
    return "\n".join(parts)


def stored(seq: int, message: Message) -> StoredMessage:
    return StoredMessage(seq, message, "turn_1", 0.0, [])


def transcript(replies: int = REPLIES) -> list[StoredMessage]:
    messages: list[StoredMessage] = []
    for number in range(replies):
        messages.append(stored(len(messages), Message("user", [TextBlock(f"Question {number}")])))
        messages.append(stored(len(messages), Message("assistant", [TextBlock(reply(number))])))
    return messages


def screen_text(app: App[Any]) -> str:
    return "\n".join(screen_lines(app))


def text_only(app: App[Any]) -> list[str]:
    """The screen's lines without the scroll bar at their right end."""
    return [line[:-2] for line in screen_text(app).splitlines()]


def replies(view: MessageView) -> list[StreamingMarkdown]:
    return list(view.query_children(StreamingMarkdown))


async def opened(pilot: Pilot[Any], replies: int = REPLIES) -> MessageView:
    view = pilot.app.query_one(MessageView)
    await view.load("ses_1", transcript(replies))
    await eventually(
        lambda: f"End of reply {replies - 1}." in screen_text(pilot.app), what="the last reply"
    )
    await settled(pilot)
    return view


async def test_an_opened_session_builds_only_the_blocks_near_its_bottom() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        shown = replies(view)
        assert len(shown) == REPLIES
        # The first replies are many screens up: not even parsed (no volumes, no blocks).
        assert not volumes(shown[0]) and not shown[0].blocks()
        last = volumes(shown[-1])
        assert last[-1].built and last[-1].children
        # Far up in the last reply, volumes have no blocks either.
        assert not last[0].built and not last[0].children
        # A one-shot render would hold every block of every reply (over PARAGRAPHS each).
        assert len(list(view.query(MarkdownBlock))) < PARAGRAPHS
        # The source is whole all the same (what copying or exporting the reply reads).
        assert [m.source for m in shown] == [reply(n) for n in range(REPLIES)]


async def test_scrolling_up_page_by_page_shows_every_paragraph_and_keeps_the_view_still() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        # Three replies of 60 paragraphs are some thirty screens: the first two are
        # unparsed when it opens, and each is built as the reader comes to it.
        view = await opened(pilot, SCROLLED_REPLIES)
        assert not volumes(replies(view)[0])
        # A page less one line: consecutive screens share a line, so every line is on one
        # of them (a smaller step only repeats lines, at six settling passes a step).
        page = view.size.height - 1
        seen: set[str] = set()
        while True:
            text = screen_text(app)
            seen.update(text.splitlines())
            if view.scroll_y <= 0:
                break
            view.scroll_to(y=max(view.scroll_y - page, 0), animate=False, immediate=True)
            app.screen._refresh_layout()
            first = text_only(app)
            await settled(pilot)
            # Blocks built above the view (whose estimated height was wrong) must not move
            # what the reader looks at (the scroll bar may change: the total height did).
            assert text_only(app) == first
        text = "\n".join(seen)
        for number in range(SCROLLED_REPLIES):
            for i in range(PARAGRAPHS):
                assert f"Paragraph {i} of reply {number}," in text
            assert f"Question {number}" in text


async def test_a_history_reply_built_in_full_has_the_blocks_of_a_one_shot_render() -> None:
    app = OneView()
    # Tall enough for the whole last reply to stay near view (built).
    async with app.run_test(size=(60, 400)) as pilot:
        view = await opened(pilot)
        markdown = replies(view)[-1]
        for volume in volumes(markdown):
            volume.build()
        await eventually(
            lambda: all(v.built for v in volumes(markdown)), what="every volume to build"
        )
        blocks = markdown.blocks()
        flat = Markdown(reply(REPLIES - 1))
        await view.mount(flat)
        await pilot.pause()
        flat_blocks = [c for c in flat.children if isinstance(c, MarkdownBlock)]
        # Reference links defined at the end of the reply resolve in every volume.
        assert signature(blocks) == signature(flat_blocks)
        assert [b.source_range for b in blocks] == [b.source_range for b in flat_blocks]


async def test_far_volumes_drop_their_blocks_and_further_ones_their_picture() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        view.scroll_home(animate=False, immediate=True)
        await eventually(
            lambda: "Paragraph 0 of reply 0," in screen_text(app), what="the top of the session"
        )
        await settled(pilot)
        last = volumes(replies(view)[-1])
        # Built at the bottom when the session opened, now many screens below the view.
        height = app.screen.size.height
        assert last[-1].region.y > (PICTURE_SCREENS + 1) * height
        await eventually(lambda: not last[-1].children, what="the blocks to be dropped")
        assert not last[-1].built and not last[-1].frozen
        # Going back down shows the bottom again, built.
        view.scroll_end(animate=False, immediate=True)
        await eventually(
            lambda: last[-1].built and f"End of reply {REPLIES - 1}." in screen_text(app),
            what="the bottom again",
        )


async def test_a_jump_into_unparsed_history_shows_its_source_until_the_blocks_are_built() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        first = replies(view)[0]
        assert not volumes(first)  # not parsed yet
        view.scroll_home(animate=False, immediate=True)
        app.screen._refresh_layout()  # the first frame after the jump, before any build
        text = screen_text(app)
        assert "## Reply 0" in text and "Paragraph 0 of reply 0, long enough" in text
        # Then the blocks replace the draft: the volumes in view are built as the reply is
        # parsed (no layout pass as drafts first), and the heading is rendered.
        await eventually(lambda: volumes(first), what="the reply to be parsed")
        assert volumes(first)[0].built
        await settled(pilot)
        text = screen_text(app)
        assert "Reply 0" in text and "## Reply 0" not in text


async def test_a_picture_in_view_is_what_the_blocks_draw() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        volume = volumes(replies(view)[-1])[-1]
        assert volume.built and volume.region.overlaps(view.region)
        before = screen_text(app)
        assert volume.freeze()
        app.screen._refresh_layout()
        assert volume.frozen and not volume.built
        assert screen_text(app) == before
        # Near view, it builds again, in the same place.
        await eventually(lambda: volume.built and volume.children, what="the volume to build")
        await settled(pilot)
        assert screen_text(app) == before


async def test_a_width_change_rebuilds_what_is_in_view() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = await opened(pilot)
        await pilot.resize_terminal(45, 20)
        await settled(pilot)
        await eventually(
            lambda: f"End of reply {REPLIES - 1}." in screen_text(app),
            what="the last reply at 45 columns",
        )
        markdown = replies(view)[-1]
        assert volumes(markdown)[-1].built
        assert all(v.picture_matches() for v in volumes(markdown) if v.frozen)


async def test_messages_keep_their_order_around_lazy_replies() -> None:
    messages = [
        stored(0, Message("user", [TextBlock("run it")])),
        stored(
            1,
            Message(
                "assistant",
                [TextBlock(reply(0)), ToolUseBlock("call_1", "exec", {"command": "ls"})],
            ),
        ),
        stored(2, Message("user", [ToolResultBlock("call_1", "a.txt")])),
        stored(3, Message("assistant", [TextBlock("Done.")])),
    ]
    app = OneView()
    async with app.run_test(size=(60, 20)):
        view = app.query_one(MessageView)
        await view.load("ses_1", messages)
        await eventually(lambda: "Done." in screen_text(app), what="the last reply")
        kinds = [type(c).__name__ for c in view.children]
        assert kinds == ["UserMessage", "StreamingMarkdown", "ToolCard", "StreamingMarkdown"]
        assert view.query_one(UserMessage).text == "run it"
        assert view.query_one(ToolCard).status == "ok"
