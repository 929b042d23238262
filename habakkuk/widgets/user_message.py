"""A message the user wrote, shown as plain text (never as markup)."""

from __future__ import annotations

from textual.content import Content
from textual.strip import Strip
from textual.widgets import Static

from habakkuk.widgets.bidi import visual_strip


class UserMessage(Static):
    """The user's words, marked by a bar at the left (right-to-left text drawn in visual
    order, see widgets/bidi.py)."""

    DEFAULT_CSS = """
    UserMessage { margin: 0 0 1 0; padding: 0 1; border-left: outer $primary;
                  background: $boost; }
    """

    def __init__(self, text: str) -> None:
        super().__init__(Content(text))
        self.text = text

    def render_line(self, y: int) -> Strip:
        # Right-to-left text in visual order, a right-to-left line at the right (bidi.py).
        return visual_strip(super().render_line(y), self.content_size.width)
