"""The card actions the Board screen and a card's detail share: assign, priority, comment,
cancel, reopen, open an attempt's session. Each goes through the board service
(`runtime.board`, a BoardAccess) in a worker as the user; the board answers with the card
read back after the change, and the notice says what the card is now (so a change that
did not take says so). A refusal is a notice, never a crash."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual import work

from habakkuk.screens.board_form import priority_problem
from habakkuk.screens.board_views import now_line, short_id
from habakkuk.screens.list_detail import PaletteEntry, SectionScreen
from habakkuk.screens.text_prompt import Confirm, TextPrompt
from habakkuk.work.board_types import USER

if TYPE_CHECKING:
    from textual.screen import Screen

    from habakkuk.work.board_types import BoardAccess, Card

A = TypeVar("A")  # what a prompt answers

# The actions on one card, in the command palette.
CARD_PALETTE = (
    PaletteEntry("assign", "assign card", "Give the card to an agent, or unassign it"),
    PaletteEntry("priority", "change priority", "Higher runs first"),
    PaletteEntry("comment", "comment", "Add a comment to the card"),
    PaletteEntry("cancel", "cancel card", "Cancel the card; a running attempt is stopped"),
    PaletteEntry("reopen", "reopen card", "Back to todo for another attempt"),
    PaletteEntry("open_attempt", "open attempt", "The latest attempt's session in the chat"),
)
CARD_ACTIONS = tuple(entry.action for entry in CARD_PALETTE)


class CardActions(SectionScreen):
    """A screen that acts on one card at a time (`acting_card`) and shows the card the
    board answers with (`card_changed`)."""

    SECTION = "Board"
    PALETTE: ClassVar[tuple[PaletteEntry, ...]] = CARD_PALETTE

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

    def ask(
        self,
        prompt: Screen[A],
        then: Callable[[BoardAccess, A], Awaitable[Card]],
        *,
        empty_ok: bool = False,
    ) -> None:
        """Ask with `prompt`; an answer (not None, and unless `empty_ok` not empty or no)
        makes the change `then` (so `then` never sees None, whatever its type says)."""

        def done(answer: A | None) -> None:
            if answer is not None and (empty_ok or answer):
                self.change(lambda board: then(board, answer))

        self.app.push_screen(prompt, done)

    def action_assign(self) -> None:
        """Ask for the agent (empty unassigns)."""
        card = self.acting_card()
        if card is not None:
            question = f"Assign {card.title!r} ({short_id(card.id)}) to (empty: unassign)"
            self.ask(
                TextPrompt(question, card.assignee),
                lambda b, agent: b.assign(card.id, agent or "", by=USER),
                empty_ok=True,
            )

    def action_priority(self) -> None:
        """Ask for the priority (a whole number; higher runs first)."""
        card = self.acting_card()
        if card is not None:
            question = f"Priority of {card.title!r} (higher runs first)"
            self.ask(
                TextPrompt(question, str(card.priority), priority_problem),
                lambda b, text: b.set_priority(card.id, int(text or 0), by=USER),
            )

    def action_comment(self) -> None:
        """Ask for a comment."""
        card = self.acting_card()
        if card is not None:
            self.ask(
                TextPrompt(f"Comment on {card.title!r}"),
                lambda b, text: b.comment(card.id, text or "", by=USER),
            )

    def action_cancel(self) -> None:
        """Cancel the card after a yes."""
        card = self.acting_card()
        if card is not None:
            running = " Its running attempt is stopped." if card.status == "doing" else ""
            self.ask(
                Confirm(f"Cancel {card.title!r} ({short_id(card.id)})?{running}"),
                lambda b, yes: b.cancel(card.id, by=USER),
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
