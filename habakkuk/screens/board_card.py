"""One card's detail: body, dependencies with their status ("waiting on X (blocked)"),
who must act on a blocked card, the result, the comments, the event log and the session
of each attempt. Keys: g assign, p priority, c comment, x cancel, r reopen, o (or 1-9)
opens an attempt's session in the chat; Esc goes back to the board. It follows the
card live (CardChanged) and reads it again every few seconds for changes made by other
processes (the CLI)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from habakkuk.screens.base import PollingScreen, on_bus
from habakkuk.screens.board_actions import CARD_ACTIONS, CardActions
from habakkuk.screens.board_views import STATUS_STYLES, short_id, state_words
from habakkuk.screens.bus_messages import CardChangedArrived
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.work.board_types import Card


def when(at: float) -> str:
    """A time as the detail shows it (local time of the terminal's machine)."""
    return dt.datetime.fromtimestamp(at).strftime("%m-%d %H:%M")


def detail_text(card: Card) -> Text:
    """The whole card, as the board read it."""
    out = Text()
    out.append(f"{card.title}\n", style="bold")
    out.append(f"{card.id} · ", style="dim")
    out.append(card.status, style=STATUS_STYLES.get(card.status, ""))
    out.append(
        f" · {card.assignee or 'unassigned'} · priority {card.priority} · "
        f"by {card.created_by} · attempt {card.attempt}\n",
        style="",
    )
    if card.status == "blocked":
        if card.blocked_kind == "question":
            out.append("Blocked on a question: you must act (comment, then reopen).\n",
                       style="bold yellow")  # fmt: skip
        else:
            out.append("Blocked: it failed (reopen for another attempt).\n", style="bold red")
        if card.blocked_reason:
            out.append(f"  {card.blocked_reason}\n")
    if card.parent:
        out.append(f"parent: {card.parent}\n")
    if card.depends_on:
        out.append("\nDepends on\n", style="bold")
        waiting = dict(card.waiting_on)
        for dep in card.depends_on:
            # waiting_on holds the dependencies not done yet; the others are done.
            status = waiting.get(dep, "done")
            line = f"  waiting on {dep} ({status})" if dep in waiting else f"  {dep} (done)"
            out.append(line + "\n", style="yellow" if status == "blocked" else "")
    out.append("\nBody\n", style="bold")
    out.append((card.body or "(none)") + "\n")
    if card.result:
        out.append("\nResult\n", style="bold")
        out.append(card.result + "\n", style="green")
    out.append("\nAttempts\n", style="bold")
    for number, session in card.attempt_sessions():
        out.append(f"  {number}: {session}\n")
    if not card.attempt:
        out.append(f"  none yet ({state_words(card)})\n", style="dim")
    out.append("\nComments\n", style="bold")
    for comment in card.comments:
        out.append(f"  {when(comment.at)} {comment.author}: ", style="dim")
        out.append(comment.text + "\n")
    if not card.comments:
        out.append("  none\n", style="dim")
    out.append("\nEvents\n", style="bold")
    for event in card.events:
        out.append(f"  {when(event.at)} {event.author} ", style="dim")
        out.append(event.kind + (f": {event.text}" if event.text else "") + "\n")
    return out


class BoardCardScreen(CardActions, PollingScreen):
    """One card; the keys act on it."""

    refresh_seconds: ClassVar[float] = 3.0

    DEFAULT_CSS = """
    BoardCardScreen #card-detail-scroll { height: 1fr; padding: 0 1; }
    BoardCardScreen #card-detail { height: auto; }
    """

    BINDINGS: ClassVar[list[Any]] = [
        Binding("g", "assign", "Assign", id="card.assign"),
        Binding("p", "priority", "Priority", id="card.priority"),
        Binding("c", "comment", "Comment", id="card.comment"),
        Binding("x", "cancel", "Cancel", id="card.cancel"),
        Binding("r", "reopen", "Reopen", id="card.reopen"),
        Binding("o", "open_attempt", "Open attempt", id="card.open"),
        *(Binding(str(n), f"open_attempt({n})", f"Attempt {n}", show=False) for n in range(1, 10)),
        Binding("escape", "back", "Back", id="card.back"),
    ]

    def __init__(self, card_id: str) -> None:
        super().__init__(id="board-card")
        self.card_id = card_id
        self.card: Card | None = None
        self._text = Static("", id="card-detail")

    def compose(self) -> ComposeResult:
        yield Static(Content("Card"), classes="section-title")
        with VerticalScroll(id="card-detail-scroll"):
            yield self._text
        yield KeyFooter()

    def refresh_data(self) -> None:
        self._read()

    def acting_card(self) -> Card | None:
        return self.card

    def card_changed(self, card: Card) -> None:
        # Read with its comments and events (the notice already said what it is now).
        self._read()

    @on_bus(CardChangedArrived)
    def _on_card(self, message: CardChangedArrived) -> None:
        if message.event.card == self.card_id:
            self._read()

    @work(group="card-read", exclusive=True)
    async def _read(self) -> None:
        board = self.board
        card = await self.call(lambda: board.get(self.card_id))
        if card is not None:
            self._show(card)

    def _show(self, card: Card) -> None:
        self.card = card
        self.query_one(".section-title", Static).update(
            Content(f"Card {short_id(card.id)} · {card.status}")
        )
        self._text.update(detail_text(card))
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CARD_ACTIONS:
            return self.card_action_allowed(action)
        return True

    def action_back(self) -> None:
        self.dismiss(None)
