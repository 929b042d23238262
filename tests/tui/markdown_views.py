"""What the Markdown virtualization tests share: a bare MessageView app and ways to look at it."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from habakkuk.widgets.markdown_stream import MarkdownVolume, StreamingMarkdown
from habakkuk.widgets.message_view import MessageView


class OneView(App[None]):
    """Nothing but the conversation view."""

    def compose(self) -> ComposeResult:
        yield MessageView()


def screen_lines(app: App[Any]) -> list[str]:
    """The text of every line on screen, as the compositor draws it now."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def volumes(markdown: StreamingMarkdown) -> list[MarkdownVolume]:
    return [c for c in markdown.children if isinstance(c, MarkdownVolume)]


async def settled(pilot: Pilot[Any], passes: int = 6) -> None:
    """Freezing, thawing and building run after layout passes: let a few go by."""
    for _ in range(passes):
        await pilot.pause()
