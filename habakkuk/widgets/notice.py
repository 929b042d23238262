"""A one-line note in the conversation: a command's answer, a stopped or failed turn."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class Notice(Static):
    """Dim text between messages; `-error` variant for failures."""

    DEFAULT_CSS = """
    Notice { margin: 0 0 1 1; color: $text-muted; }
    Notice.-error { color: $text-error; }
    """

    def __init__(self, text: str, *, error: bool = False) -> None:
        super().__init__(Content(text), classes="-error" if error else "")
        self.text = text
