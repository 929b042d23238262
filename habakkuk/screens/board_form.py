"""The Board screen's add form: a card's title, body, assignee, priority and the cards it
depends on (ids or unique prefixes). The form checks what it can alone (a title, a whole
priority in range); the board checks the rest (the agent exists, the dependencies exist)
and its refusal is a notice on the screen."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from habakkuk.engine.i18n import t
from habakkuk.work.board_types import PRIORITY_RANGE, TITLE_MAX, NewCard

FIELDS = ("title", "body", "assignee", "priority", "depends")


def priority_problem(text: str) -> str | None:
    """Why `text` is not a priority, or None ("" is the default, 0)."""
    low, high = PRIORITY_RANGE
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        return f"priority: {text!r} is not a whole number ({low} to {high})"
    if not low <= value <= high:
        return f"priority: {value} is out of range ({low} to {high})"
    return None


class BoardForm(ModalScreen[NewCard | None]):
    """Tab or Enter moves to the next field; Enter in the last one adds; Esc cancels."""

    DEFAULT_CSS = """
    BoardForm { align: center middle; }
    BoardForm > Vertical { width: 80; max-width: 95%; height: auto; padding: 1 2;
                           border: round $primary; background: $surface; }
    BoardForm .label { color: $text-muted; height: 1; }
    BoardForm #card-form-error { height: auto; color: $text-error; }
    """
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape", "cancel", "Cancel", id="board-form.cancel"),
    ]

    def __init__(self, assignee: str = "") -> None:
        super().__init__(id="board-form")
        self.assignee = assignee
        self._error = Static("", id="card-form-error")

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content(t("tui.card_form.title")), classes="section-title")
            yield Static(t("tui.card_form.card_title"), classes="label")
            yield Input("", id="card-form-title", placeholder=t("tui.card_form.title_hint"))
            yield Static(t("tui.card_form.body"), classes="label")
            yield Input("", id="card-form-body")
            yield Static(t("tui.card_form.assignee"), classes="label")
            yield Input(self.assignee, id="card-form-assignee")
            yield Static(t("tui.card_form.priority"), classes="label")
            yield Input("", id="card-form-priority", placeholder="0")
            yield Static(t("tui.card_form.depends"), classes="label")
            yield Input("", id="card-form-depends")
            yield self._error
            yield Static(t("tui.form.hint"), classes="label")

    def on_mount(self) -> None:
        self.query_one("#card-form-title", Input).focus()

    def value(self, name: str) -> str:
        """One field's text, stripped."""
        return self.query_one(f"#card-form-{name}", Input).value.strip()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "card-form-depends":
            self.action_add()
        else:
            self.focus_next()

    def action_add(self) -> None:
        """Check the fields and hand the new card to the screen (which stores it)."""
        values = {name: self.value(name) for name in FIELDS}
        problem = priority_problem(values["priority"])
        if not values["title"]:
            problem = t("tui.card_form.title_required")
        elif len(values["title"]) > TITLE_MAX:
            problem = t("tui.card_form.title_long", max=TITLE_MAX)
        if problem:
            self._error.update(Content(problem))
            return
        depends = tuple(d.strip() for d in values["depends"].split(",") if d.strip())
        self.dismiss(
            NewCard(
                title=values["title"],
                body=values["body"],
                assignee=values["assignee"],
                priority=int(values["priority"] or 0),
                depends_on=depends,
            )
        )

    def action_cancel(self) -> None:
        self.dismiss(None)
