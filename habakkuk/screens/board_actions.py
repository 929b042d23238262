"""The card actions the Board screen and a card's detail share: assign, priority, comment,
cancel, reopen, open an attempt's session. Each goes through the board service
(`runtime.board`, a BoardAccess) in a worker as the user; the board answers with the card
read back after the change, and the notice says what the card is now (so a change that
did not take says so). A refusal is a notice, never a crash."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from textual import work

from habakkuk.engine.errors import HabakkukError
from habakkuk.screens.base import RuntimeScreen
from habakkuk.screens.board_form import priority_problem
from habakkuk.screens.board_views import now_line, short_id
from habakkuk.screens.text_prompt import Confirm, TextPrompt
from habakkuk.work.board_types import USER

if TYPE_CHECKING:
    from habakkuk.work.board_types import BoardAccess, Card

T = TypeVar("T")

# (palette title, about, action) of the actions on one card.
CARD_PALETTE = (
    ("Board: assign card", "Give the card to an agent, or unassign it (g)", "assign"),
    ("Board: change priority", "Higher runs first (p)", "priority"),
    ("Board: comment", "Add a comment to the card (c)", "comment"),
    ("Board: cancel card", "Cancel the card; a running attempt is stopped (x)", "cancel"),
    ("Board: reopen card", "Back to todo for another attempt (r)", "reopen"),
    ("Board: open attempt", "The latest attempt's session in the chat (o)", "open_attempt"),
)
CARD_ACTIONS = ("assign", "priority", "comment", "cancel", "reopen", "open_attempt")


class CardActions(RuntimeScreen):
    """A screen that acts on one card at a time (`acting_card`) and shows the card the
    board answers with (`card_changed`)."""

    @property
    def board(self) -> BoardAccess:
        """The home's board, through the app's host."""
        board: BoardAccess = self.runtime.board
        return board

    def acting_card(self) -> Card | None:
        """The card the keys act on (the highlighted one, the one shown); None: none."""
        return None

    def card_changed(self, card: Card) -> None:
        """Show `card` as the board now has it."""

    async def call(self, what: Callable[[], Awaitable[T]]) -> T | None:
        """Run one board call; a refusal is a notice and None."""
        try:
            return await what()
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return None

    def card_action_allowed(self, action: str) -> bool | None:
        """Whether a card action applies to the acting card (for check_action)."""
        card = self.acting_card()
        if card is None:
            return False
        if action == "cancel":
            return card.open
        if action == "reopen":
            return not card.open or card.status == "blocked"
        if action == "open_attempt":
            return card.attempt > 0
        return True

    @work(group="board-edit")
    async def change(self, what: Callable[[BoardAccess], Awaitable[Card]]) -> None:
        """Make one change and say what the card is now."""
        board = self.board
        card = await self.call(lambda: what(board))
        if card is not None:
            self.notify(now_line(card), markup=False)
            self.card_changed(card)

    def action_assign(self) -> None:
        """Ask for the agent (empty unassigns)."""
        card = self.acting_card()
        if card is None:
            return
        card_id = card.id

        def done(agent: str | None) -> None:
            if agent is not None:
                self.change(lambda b: b.assign(card_id, agent, by=USER))

        question = f"Assign {card.title!r} ({short_id(card_id)}) to (empty: unassign)"
        self.app.push_screen(TextPrompt(question, card.assignee), done)

    def action_priority(self) -> None:
        """Ask for the priority (a whole number; higher runs first)."""
        card = self.acting_card()
        if card is None:
            return
        card_id = card.id

        def done(text: str | None) -> None:
            if text:
                self.change(lambda b: b.set_priority(card_id, int(text), by=USER))

        question = f"Priority of {card.title!r} (higher runs first)"
        self.app.push_screen(TextPrompt(question, str(card.priority), priority_problem), done)

    def action_comment(self) -> None:
        """Ask for a comment."""
        card = self.acting_card()
        if card is None:
            return
        card_id = card.id

        def done(text: str | None) -> None:
            if text:
                self.change(lambda b: b.comment(card_id, text, by=USER))

        self.app.push_screen(TextPrompt(f"Comment on {card.title!r}"), done)

    def action_cancel(self) -> None:
        """Cancel the card after a yes."""
        card = self.acting_card()
        if card is None:
            return
        card_id = card.id

        def done(yes: bool | None) -> None:
            if yes:
                self.change(lambda b: b.cancel(card_id, by=USER))

        running = " Its running attempt is stopped." if card.status == "doing" else ""
        self.app.push_screen(
            Confirm(f"Cancel {card.title!r} ({short_id(card_id)})?{running}"), done
        )

    def action_reopen(self) -> None:
        """Back to todo for another attempt."""
        card = self.acting_card()
        if card is not None:
            card_id = card.id
            self.change(lambda b: b.reopen(card_id, by=USER))

    def action_open_attempt(self, attempt: int = 0) -> None:
        """An attempt's session (default: the latest) in the chat."""
        card = self.acting_card()
        if card is None or card.attempt == 0:
            return
        sessions = dict(card.attempt_sessions())
        session = sessions.get(attempt or card.attempt)
        if session is not None:
            self.happ.open_session(session)

    def card_palette(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """The card actions for the command palette."""
        return [
            (title, about, getattr(self, f"action_{action}"))
            for title, about, action in CARD_PALETTE
        ]
