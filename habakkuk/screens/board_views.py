"""How the terminal shows a card in a line: its short id, its state in words (who must act
on a blocked card), and what a change left it as (every action says what the card is now,
read back from the board)."""

from __future__ import annotations

from rich.text import Text

from habakkuk.work.board_types import CARD_ID_PREFIX, Card

STATUS_STYLES = {
    "todo": "",
    "doing": "cyan",
    "blocked": "bold yellow",
    "done": "green",
    "cancelled": "dim",
}


def short_id(card_id: str) -> str:
    """The id without "card_", cut to 6 hex: enough for a prefix lookup on one home."""
    return card_id.removeprefix(CARD_ID_PREFIX)[:6]


def state_words(card: Card) -> str:
    """What the card waits for, in words: a blocked card says who must act."""
    hold = card.hold()
    if hold is None:
        if card.status == "todo":
            return "ready"
        return f"attempt {card.attempt}" if card.status == "doing" else card.status
    if hold.kind == "question":
        return "needs you: question"
    if hold.kind == "waiting":
        dep, status = hold.waiting_on[0]
        more = f" +{len(hold.waiting_on) - 1}" if len(hold.waiting_on) > 1 else ""
        return f"waiting on {short_id(dep)} ({status}){more}"
    return "unassigned" if hold.kind == "unassigned" else "failed: reopen"


def state_cell(card: Card) -> Text:
    style = STATUS_STYLES.get(card.status, "")
    if card.status == "blocked" and card.blocked_kind != "question":
        style = "bold red"
    elif card.status == "todo" and card.waiting_on:
        style = "yellow" if any(s == "blocked" for _, s in card.waiting_on) else "dim"
    return Text(state_words(card), style=style)


def now_line(card: Card) -> str:
    """What a card is now, for the notice after an action."""
    who = card.assignee or "unassigned"
    line = f"{card.title} ({short_id(card.id)}) is now {card.status} · {who}"
    line += f" · priority {card.priority}"
    if card.status == "blocked":
        line += f" · {state_words(card)}"
    return line
