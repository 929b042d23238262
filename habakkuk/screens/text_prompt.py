"""Small modals: one line of text (rename, export path), checked inline; a yes or no."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from habakkuk.engine.i18n import t

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


class Confirm(ModalScreen[bool]):
    """A yes-or-no question: y (or Enter) answers yes, n or Esc no."""

    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 70; max-width: 95%; height: auto; padding: 1 2;
                         border: round $warning; background: $surface; }
    Confirm .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content(self.question))
            yield Static(t("tui.confirm.hint"), classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ShowText(ModalScreen[None]):
    """A long text shown whole (an error the overview cut short); Esc, Enter or q closes."""

    DEFAULT_CSS = """
    ShowText { align: center middle; }
    ShowText > Vertical { width: 90%; height: auto; max-height: 90%; padding: 0 1;
                          border: round $error; background: $surface; }
    ShowText VerticalScroll { height: auto; max-height: 100%; }
    ShowText .title { text-style: bold; }
    ShowText .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="show.close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content(self.title_text), classes="title")
            with VerticalScroll():
                yield Static(Content(self.text), id="full-text")
            yield Static(t("tui.show.hint"), classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)
