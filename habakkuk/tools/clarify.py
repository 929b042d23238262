"""clarify: ask the user 1 to 5 questions, with optional lettered choices, and wait.

The questions go to the turn's approver when it is also an `Asker` (the
terminal UI, a chat). A run with nobody to answer (unattended, or a client
that cannot take questions) gets a clear error, so the model goes on with
stated assumptions instead of waiting forever. `QuestionsAccess` is what a client uses
of the waiting questions (the approvals service holds them; the terminal answers them).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput

MAX_QUESTIONS = 5
MAX_CHOICES = 8
NO_ASKER = (
    "clarify: nobody can answer questions in this run (no interactive user is attached); "
    "go on with reasonable assumptions and state them in your reply"
)


@dataclass
class Question:
    """One question; choices are shown lettered a), b), ..."""

    text: str
    choices: list[str] = field(default_factory=list)

    def render(self, number: int) -> str:
        lines = [f"{number}. {self.text}"]
        lines += [f"   {string.ascii_lowercase[i]}) {c}" for i, c in enumerate(self.choices)]
        return "\n".join(lines)


@dataclass
class ClarifyRequest:
    """What an asker is shown."""

    agent: str
    session: str
    turn: str
    questions: list[Question]
    id: str = ""  # given by the asker that puts it to a client (qst_...)

    def render(self) -> str:
        return "\n".join(q.render(i) for i, q in enumerate(self.questions, start=1))


@runtime_checkable
class Asker(Protocol):
    """An approver that can also put questions to the user.

    `ask` returns the user's answer text, or None when nobody answered in time.
    """

    async def ask(self, request: ClarifyRequest) -> str | None: ...


class QuestionsAccess(Protocol):
    """The waiting clarify questions (habakkuk.services.approvals.Approvals holds them)."""

    @property
    def questions(self) -> list[ClarifyRequest]:
        """Waiting clarify requests, oldest first."""
        ...

    def answer_question(self, question_id: str, text: str) -> bool:
        """Answer a waiting clarify request; False when it no longer waits."""
        ...


class Clarify(Tool):
    """The clarify tool."""

    name = "clarify"
    description = (
        f"Ask the user 1 to {MAX_QUESTIONS} short questions when you cannot go on without "
        "their decision. Give choices where they help (shown as a), b), ...). Returns their "
        "answer; when nobody can answer, go on with stated assumptions."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_QUESTIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "question": {"type": "string", "minLength": 1},
                        "choices": {
                            "type": "array",
                            "items": {"type": "string"},
                            "maxItems": MAX_CHOICES,
                        },
                    },
                    "required": ["question"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["questions"],
        "additionalProperties": False,
    }
    # Asking changes nothing; the user decides what happens next.
    risk = Risk.READ

    def title(self, args: dict[str, Any]) -> str:
        first = (args.get("questions") or [{}])[0]
        return str(first.get("question", "clarify"))[:200] if isinstance(first, dict) else "?"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        asker: object = ctx.approver
        if not isinstance(asker, Asker):
            # Behind a reviewer (approvals: reviewer_then_human) the human may take questions.
            asker = getattr(asker, "human", None)
        if not isinstance(asker, Asker):
            raise ToolError(NO_ASKER)
        questions = [
            Question(str(q["question"]).strip(), [str(c) for c in q.get("choices") or []])
            for q in args["questions"]
        ]
        request = ClarifyRequest(ctx.agent, ctx.session, ctx.turn, questions)
        answer = await asker.ask(request)
        if answer is None or not answer.strip():
            return ToolOutput(
                "the user did not answer in time; go on with reasonable assumptions and state "
                "them in your reply"
            )
        return ToolOutput(f"the user answered:\n{answer.strip()}")
