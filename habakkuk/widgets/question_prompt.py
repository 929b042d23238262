"""A clarify question from the agent: lettered choices shown, answered in the composer."""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

from textual.content import Content

from habakkuk.engine.i18n import t

from .waiting_prompt import WaitingPrompt

if TYPE_CHECKING:
    from habakkuk.tools.clarify import ClarifyRequest


def question_lines(request: ClarifyRequest) -> list[str]:
    """The questions as numbered lines with their choices lettered a), b), ..."""
    lines: list[str] = []
    questions = request.questions
    for number, question in enumerate(questions, start=1):
        prefix = f"{number}. " if len(questions) > 1 else ""
        lines.append(prefix + " ".join(str(question.text).split()))
        for index, choice in enumerate(question.choices):
            lines.append(f"   {string.ascii_lowercase[index]}) " + " ".join(str(choice).split()))
    return lines


class QuestionPrompt(WaitingPrompt["ClarifyRequest"]):
    """The oldest waiting question of the chat's session; the next message answers it."""

    DEFAULT_CSS = """
    QuestionPrompt { display: none; height: auto; max-height: 14; padding: 0 1;
                     border: round $accent; }
    QuestionPrompt.-waiting { display: block; }
    """

    def describe(self, request: ClarifyRequest) -> Content:
        parts: list[Content | tuple[str, str] | str] = [(t("tui.question.asks"), "bold"), "\n"]
        parts.append(Content("\n".join(question_lines(request))))
        hint = "\n" + t("tui.question.hint")
        if len(self.requests) > 1:
            hint += " " + t("tui.more_waiting", count=len(self.requests) - 1) + "."
        parts.append((hint, "dim"))
        return Content.assemble(*parts)
