"""The board as text: the state line every action prints and the 80-column table."""

from __future__ import annotations

import dataclasses
from typing import Any

from habakkuk.screens.board_views import state_words
from habakkuk.work.board_text import detail, state_line, table
from habakkuk.work.board_types import Card, CardComment, CardEvent


def card(**fields: Any) -> Card:
    base = Card(
        id="card_ab12cd34ef",
        title="Write the report",
        body="",
        assignee="writer",
        created_by="user",
        status="todo",
        priority=0,
        result="",
        parent=None,
        depends_on=(),
        attempt=0,
        session="",
        created_at=1.0,
        updated_at=1.0,
        revision=1,
    )
    return dataclasses.replace(base, **fields)


def test_the_state_line_says_the_attempt_and_why_a_card_waits() -> None:
    assert state_line(card(status="doing", attempt=2)) == (
        "card_ab12cd34ef is doing (attempt 2), assigned to writer"
    )
    waiting = card(depends_on=("card_0000000001",), waiting_on=(("card_0000000001", "blocked"),))
    assert state_line(waiting).endswith("waiting on card_0000000001 (blocked)")
    assert state_line(card(assignee="")) == "card_ab12cd34ef is todo; unassigned"
    question = card(status="blocked", blocked_kind="question", blocked_reason="Which dates?")
    assert state_line(question) == "card_ab12cd34ef is blocked; question: Which dates?"
    failed = card(status="blocked", blocked_kind="failed", blocked_reason="out of attempts")
    assert state_line(failed).endswith("failed: out of attempts")
    assert state_line(card(status="done")) == "card_ab12cd34ef is done"


def test_the_table_is_aligned_and_fits_80_columns() -> None:
    cards = [
        card(title="A" * 120, priority=100, assignee="a-very-long-agent-name"),
        card(
            id="card_0000000002",
            title="Short",
            priority=-100,
            status="blocked",
            blocked_kind="failed",
            blocked_reason="the turn failed: " + "x" * 200,
        ),
    ]
    lines = table(cards)
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines), lines
    head = lines[0]
    for line in lines[1:]:
        assert line[head.index("STATUS") - 1] == " "
    assert lines[2][head.index("TITLE") :].startswith("Short")
    assert "…" in lines[1] and "failed: the turn" in lines[2] and len(lines[2]) == 80
    assert table([]) == []


def test_a_table_with_nothing_waiting_gives_the_title_the_room() -> None:
    (head, row) = table([card(status="done", title="T" * 70)])
    assert "WHY" not in head and len(row) == 80


def test_detail_shows_comments_events_and_attempt_sessions() -> None:
    shown = detail(
        card(
            status="doing",
            attempt=2,
            comments=(CardComment("user", "use the template", 2.0),),
            events=(CardEvent("board", "claimed", "card_ab12cd34ef_a2", 3.0),),
            result="",
            body="line one\nline two",
        )
    )
    assert "attempt 2: session ses_card_ab12cd34ef_a2" in shown
    assert "  user: use the template" in shown and "  board claimed: card_ab12cd34ef_a2" in shown
    assert "  line two" in shown


def test_every_surface_words_the_same_decision_about_what_holds_a_card() -> None:
    cases = {
        "question": card(status="blocked", blocked_kind="question", blocked_reason="Which?"),
        "failed": card(status="blocked", blocked_kind="failed", blocked_reason="no luck"),
        "waiting": card(waiting_on=(("card_0000000001", "doing"),)),
        "unassigned": card(assignee=""),
    }
    for kind, held in cases.items():
        hold = held.hold()
        assert hold is not None and hold.kind == kind
        # The CLI and tools say why; the screen says who must act: both from one decision.
        assert state_line(held) != f"{held.id} is {held.status}"
        assert state_words(held) not in ("ready", held.status)
    for free in (card(), card(status="doing", attempt=1), card(status="done")):
        assert free.hold() is None
    assert state_words(card()) == "ready"
    assert state_words(cases["question"]) == "needs you: question"
    assert state_words(cases["failed"]) == "failed: reopen"
