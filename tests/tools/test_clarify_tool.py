"""clarify: questions go to an approver that can ask; otherwise a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.events import EventBus
from habakkuk.engine.toolkit.approvals import ApprovalDecision, ApprovalHub, ApprovalRequest
from habakkuk.engine.toolkit.registry import ToolContext, ToolError
from habakkuk.tools.clarify import NO_ASKER, Clarify, ClarifyRequest
from tests.helpers import tool_context

QUESTIONS = {
    "questions": [
        {"question": "Which database?", "choices": ["SQLite", "Postgres"]},
        {"question": "Deadline?"},
    ]
}


class TerminalAsker:
    """An approver that can also take questions (as the terminal UI is)."""

    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.asked: list[ClarifyRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision("deny")

    async def ask(self, request: ClarifyRequest) -> str | None:
        self.asked.append(request)
        return self.answer


def ctx_for(tmp_path: Path, approver: object) -> ToolContext:
    return tool_context(tmp_path, mode="read-only", workspace=tmp_path, approver=approver)


async def test_questions_are_shown_with_lettered_choices_and_the_answer_returned(
    tmp_path: Path,
) -> None:
    asker = TerminalAsker("1b, next Friday")
    out = await Clarify().run(QUESTIONS, ctx_for(tmp_path, asker))
    assert out.text == "the user answered:\n1b, next Friday"
    assert asker.asked[0].render() == (
        "1. Which database?\n   a) SQLite\n   b) Postgres\n2. Deadline?"
    )


async def test_no_answer_in_time_tells_the_model_to_go_on(tmp_path: Path) -> None:
    out = await Clarify().run(QUESTIONS, ctx_for(tmp_path, TerminalAsker(None)))
    assert "did not answer" in out.text and "assumptions" in out.text


@pytest.mark.parametrize("approver", [None, ApprovalHub(EventBus())])
async def test_without_an_asker_the_tool_says_so(tmp_path: Path, approver: object) -> None:
    with pytest.raises(ToolError) as info:
        await Clarify().run(QUESTIONS, ctx_for(tmp_path, approver))
    assert str(info.value) == NO_ASKER


async def test_questions_reach_the_human_behind_a_reviewer(tmp_path: Path) -> None:
    from habakkuk.engine.toolkit.reviewer import ReviewerApprover

    asker = TerminalAsker("yes")
    chain = ReviewerApprover(reviewer=None, human=asker)  # type: ignore[arg-type]  # never asked
    out = await Clarify().run(QUESTIONS, ctx_for(tmp_path, chain))
    assert out.text.endswith("yes") and len(asker.asked) == 1
