"""A message the user wrote, shown as plain text (never as markup)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class UserMessage(Static):
    """The user's words, marked by a bar at the left."""

    DEFAULT_CSS = """
    UserMessage { margin: 0 0 1 0; padding: 0 1; border-left: outer $primary;
                  background: $boost; }
    """

    def __init__(self, text: str) -> None:
        super().__init__(Content(text))
        self.text = text
