"""Streamed Markdown far from the screen is frozen into a picture and thaws in view."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock

from habakkuk.engine.events import TurnEnded, TurnText
from habakkuk.widgets.markdown_stream import VOLUME_BLOCKS, MarkdownVolume, StreamingMarkdown
from habakkuk.widgets.message_view import MessageView
from tests.helpers import eventually
from tests.tui.conftest import TurnIds
from tests.tui.markdown_views import OneView, screen_lines, settled, volumes
from tests.tui.test_tui_streaming import signature

# Enough blocks for four full volumes and some: paragraphs, fences, a list and a link.
REPLY = "".join(
    f"Paragraph {i} of the reply, long enough to wrap once on a narrow screen.\n\n"
    + ("```python\nprint('block')\n```\n\n" if i % 9 == 0 else "")
    + ("- item one\n- item two\n\n" if i % 13 == 0 else "")
    + ("A [link](https://example.com/x) here.\n\n" if i % 17 == 0 else "")
    for i in range(VOLUME_BLOCKS * 4 + 7)
)


# The one turn the events belong to.
TURN = TurnIds(session="ses_1", turn="turn_1")


async def streamed(pilot: Pilot[Any], *, end: bool) -> tuple[MessageView, StreamingMarkdown]:
    """The app's view after REPLY was streamed into it (and the turn ended, with `end`)."""
    view = pilot.app.query_one(MessageView)
    view.session = "ses_1"
    return view, await stream(pilot, view, REPLY, end=end)


async def stream(
    pilot: Pilot[Any], view: MessageView, text: str, *, end: bool
) -> StreamingMarkdown:
    """Feed `text` line by line as turn.text events, rendering at every line."""
    for line in text.splitlines(keepends=True):
        await view.handle(TurnText(**TURN, text=line))
        markdown = view.query_one(StreamingMarkdown)
        await markdown.flush()
    if end:
        await view.handle(TurnEnded(**TURN, status="done", reply=text))
    await pilot.pause()
    return markdown


async def test_volumes_far_above_the_screen_freeze_and_keep_their_height() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view, markdown = await streamed(pilot, end=False)
        await settled(pilot)
        shown = volumes(markdown)
        assert len(shown) >= 4
        # The first volumes are many screens above the bottom, where the view is anchored.
        await eventually(lambda: shown[0].frozen, what="the first volume to freeze")
        assert not shown[-1].frozen
        # Frozen volumes leave the layout pass: their blocks are not arranged any more.
        assert not any(b.region for b in shown[0].children if isinstance(b, MarkdownBlock))
        flat = Markdown(REPLY)
        await view.mount(flat)
        await settled(pilot)
        # Same height as the blocks they stand in for: the document's height is unchanged.
        assert markdown.region.height == flat.region.height


async def test_a_frozen_volume_draws_exactly_what_its_blocks_draw() -> None:
    app = OneView()
    async with app.run_test(size=(60, 40)) as pilot:
        view, markdown = await streamed(pilot, end=True)
        await settled(pilot)
        for volume in volumes(markdown):
            volume.thaw()
        await settled(pilot)
        view.scroll_to(y=10, animate=False, immediate=True)
        await settled(pilot)
        volume = volumes(markdown)[0]
        assert not volume.frozen and volume.region.overlaps(view.region)
        before = screen_lines(app)
        # Freezing a volume on screen (normally done off screen) must not change a cell.
        assert volume.freeze()
        # Lay the screen out now: near the screen, the volume thaws again after the pass.
        app.screen._refresh_layout()
        assert volume.frozen and not any(b.region for b in volume.query(MarkdownBlock))
        assert screen_lines(app) == before
        assert "Paragraph 2 of the reply" in "\n".join(before)


async def test_scrolling_to_the_top_while_streaming_shows_the_start_of_the_reply() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view, markdown = await streamed(pilot, end=False)
        first = volumes(markdown)[0]
        await eventually(lambda: first.frozen, what="the first volume to freeze")
        heights = [v.region.height for v in volumes(markdown)]
        view.scroll_home(animate=False, immediate=True)
        # The first frame after the jump already shows the text: the picture stands in
        # until the volume thaws after that layout pass.
        app.screen._refresh_layout()
        assert first.frozen
        assert "Paragraph 0 of the reply" in "\n".join(screen_lines(app))
        # Then the volume thaws: its blocks are laid out again, same place, same height.
        await eventually(lambda: not first.frozen, what="the first volume to thaw")
        await settled(pilot)
        assert [v.region.height for v in volumes(markdown)] == heights
        blocks = [b for b in first.children if isinstance(b, MarkdownBlock)]
        assert blocks[0].region.y == first.region.y
        assert "Paragraph 0 of the reply" in "\n".join(screen_lines(app))
        # The stream goes on below while the reader is at the top.
        await view.handle(TurnText(**TURN, text="\n\nThe very end.\n"))
        await view.handle(TurnEnded(**TURN, status="done"))
        await settled(pilot)
        assert "Paragraph 0 of the reply" in "\n".join(screen_lines(app))


async def test_the_whole_reply_is_there_after_the_stream_ends() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view, markdown = await streamed(pilot, end=True)
        await settled(pilot)
        assert any(v.frozen for v in volumes(markdown))
        flat = Markdown(REPLY)
        await view.mount(flat)
        await pilot.pause()
        flat_blocks = [c for c in flat.children if isinstance(c, MarkdownBlock)]
        assert signature(markdown.blocks()) == signature(flat_blocks)
        # Scrolled through from top to bottom, every paragraph appears on screen.
        seen: set[str] = set()
        view.scroll_home(animate=False, immediate=True)
        while True:
            await settled(pilot)
            seen.update(screen_lines(app))
            if view.scroll_y >= view.max_scroll_y:
                break
            view.scroll_to(y=view.scroll_y + 15, animate=False, immediate=True)
        text = "\n".join(seen)
        for i in range(VOLUME_BLOCKS * 4 + 7):
            assert f"Paragraph {i} of the reply" in text


async def test_a_width_change_or_a_new_theme_thaws_frozen_volumes() -> None:
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view, markdown = await streamed(pilot, end=True)
        first = volumes(markdown)[0]
        await eventually(lambda: first.frozen, what="the first volume to freeze")
        # A picture drawn at 60 columns is wrong at 50: the blocks are laid out again, and
        # frozen again at the new width.
        await pilot.resize_terminal(50, 20)
        await eventually(
            lambda: first.frozen and first.picture_matches(), what="a picture at 50 columns"
        )
        flat = Markdown(REPLY)
        await view.mount(flat)
        await settled(pilot)
        assert markdown.region.height == flat.region.height
        await flat.remove()
        # Pictures hold the old theme's colours.
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        assert not first.picture_matches()
        await eventually(
            lambda: first.frozen and first.picture_matches(), what="a picture in the new theme"
        )


async def test_a_link_clicked_in_a_picture_is_a_link_clicked_in_the_document() -> None:
    clicked: list[str] = []

    class Links(OneView):
        def on_markdown_link_clicked(self, message: Markdown.LinkClicked) -> None:
            clicked.append(message.href)

    app = Links()
    async with app.run_test(size=(60, 20)) as pilot:
        _, markdown = await streamed(pilot, end=True)
        first = volumes(markdown)[0]
        await eventually(lambda: first.frozen, what="the first volume to freeze")
        await first.run_action("link('https://example.com/x')")
        await pilot.pause()
        assert clicked == ["https://example.com/x"]


async def test_after_each_render_every_block_is_shown_and_no_replaced_block_remains() -> None:
    # New blocks are mounted hidden and swapped in: none may stay hidden or linger.
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(MessageView)
        view.session = "ses_1"
        text = REPLY[:3000]
        for index in range(0, len(text), 37):
            await view.handle(TurnText(**TURN, text=text[index : index + 37]))
            markdown = view.query_one(StreamingMarkdown)
            await markdown.flush()
            await pilot.pause()
            blocks = markdown.blocks()
            assert all(block.display for block in blocks)
            loose = [c for c in markdown.children if not isinstance(c, MarkdownVolume)]
            assert loose == markdown._tail
        await view.handle(TurnEnded(**TURN, status="done"))
        await pilot.pause()
        flat = Markdown(text)
        await view.mount(flat)
        await pilot.pause()
        flat_blocks = [c for c in flat.children if isinstance(c, MarkdownBlock)]
        assert signature(markdown.blocks()) == signature(flat_blocks)
