"""A small modal that asks for one line of text (rename, export path), checked inline."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

Check = Callable[[str], str | None]


class TextPrompt(ModalScreen[str | None]):
    """Enter accepts (when `check` finds no problem), Esc cancels (returns None)."""

    DEFAULT_CSS = """
    TextPrompt { align: center middle; }
    TextPrompt > Vertical { width: 70; max-width: 95%; height: auto; padding: 1 2;
                            border: round $primary; background: $surface; }
    TextPrompt .error { color: $text-error; height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt.cancel")]

    def __init__(self, question: str, value: str = "", check: Check | None = None) -> None:
        super().__init__()
        self.question = question
        self.value = value
        self.check = check
        self._error = Static("", classes="error")

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content(self.question))
            yield Input(self.value, id="answer")
            yield self._error

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        problem = self.check(value) if self.check else None
        if problem:
            self._error.update(Content(problem))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)
