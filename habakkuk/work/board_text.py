"""The board as text, written once for the board tools and `habakkuk board`: one card's
state now ("card_ab12 is doing (attempt 1)"), an aligned table readable at 80 columns,
and a card's detail."""

from __future__ import annotations

from collections.abc import Sequence

from .board_types import Card

WIDTH = 80
_ASSIGNEE_MAX = 12
_TITLE_MIN = 16


def _short(text: str, width: int) -> str:
    """`text` on one line in at most `width` characters (an ellipsis says it was cut)."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    return flat[: max(width - 1, 0)] + "…"


def why(card: Card) -> str:
    """Why an open card is not moving: what it waits on, or why it is blocked ("" else)."""
    hold = card.hold()
    if hold is None:
        return ""
    if hold.kind == "waiting":
        return "waiting on " + ", ".join(f"{dep} ({st})" for dep, st in hold.waiting_on)
    return f"{hold.kind}: {hold.reason}" if hold.reason else hold.kind


def state_line(card: Card) -> str:
    """The card's state now, in one line."""
    head = f"{card.id} is {card.status}"
    if card.status == "doing":
        head += f" (attempt {card.attempt})"
    if card.status in ("doing", "todo") and card.assignee:
        head += f", assigned to {card.assignee}"
    reason = why(card)
    return f"{head}; {_short(reason, 200)}" if reason else head


def table(cards: Sequence[Card], *, width: int = WIDTH) -> list[str]:
    """An aligned table of cards (id, status, priority, assignee, title, why), each line at
    most `width` characters; [] for no cards."""
    if not cards:
        return []
    id_w = max(len("ID"), *(len(c.id) for c in cards))
    st_w = max(len("STATUS"), *(len(c.status) for c in cards))
    pr_w = max(len("PRI"), *(len(str(c.priority)) for c in cards))
    as_w = min(_ASSIGNEE_MAX, max(len("ASSIGNEE"), *(len(c.assignee or "-") for c in cards)))
    fixed = id_w + st_w + pr_w + as_w + 4
    reasons = [why(c) for c in cards]
    rest = max(width - fixed, _TITLE_MIN)
    if any(reasons):
        title_w = min(max(len("TITLE"), *(len(c.title) for c in cards)), max(rest // 2, _TITLE_MIN))
        why_w = max(width - fixed - title_w - 1, 0)
    else:
        title_w, why_w = rest, 0

    def row(cells: tuple[str, str, str, str, str, str]) -> str:
        ident, status, pri, assignee, title, reason = cells
        line = (
            f"{ident:<{id_w}} {status:<{st_w}} {pri:>{pr_w}} "
            f"{_short(assignee, as_w):<{as_w}} {_short(title, title_w):<{title_w}}"
        )
        if why_w:
            line += " " + _short(reason, why_w)
        return line.rstrip()

    lines = [row(("ID", "STATUS", "PRI", "ASSIGNEE", "TITLE", "WHY" if why_w else ""))]
    for card, reason in zip(cards, reasons, strict=True):
        cells = (card.id, card.status, str(card.priority), card.assignee or "-", card.title, reason)
        lines.append(row(cells))
    return lines


def detail(card: Card) -> list[str]:
    """One card in full: its fields, dependencies, result, attempts, comments and events."""
    lines = [f"{card.id} {card.title!r}", state_line(card)]
    lines.append(
        f"assignee: {card.assignee or '(unassigned)'}; created by {card.created_by}; "
        f"priority {card.priority}"
    )
    if card.parent:
        lines.append(f"parent: {card.parent}")
    if card.depends_on:
        lines.append("depends on: " + ", ".join(card.depends_on))
    if card.deliver_to:
        lines.append(f"delivers to: {card.deliver_to}")
    if card.body:
        lines += ["body:", *("  " + line for line in card.body.splitlines())]
    if card.result:
        lines += ["result:", *("  " + line for line in card.result.splitlines())]
    for attempt, session in card.attempt_sessions():
        lines.append(f"attempt {attempt}: session {session}")
    if card.comments:
        lines.append("comments:")
        lines += [f"  {c.author}: {_short(c.text, 500)}" for c in card.comments]
    if card.events:
        lines.append("events:")
        lines += [
            f"  {e.author} {e.kind}" + (f": {_short(e.text, 200)}" if e.text else "")
            for e in card.events
        ]
    return lines
