"""A clarify question from the agent: lettered choices shown, answered in the composer."""

from __future__ import annotations

import string
from typing import Any

from textual.content import Content
from textual.widgets import Static


def question_lines(request: Any) -> list[str]:
    """The questions as numbered lines with their choices lettered a), b), ..."""
    lines: list[str] = []
    questions = list(getattr(request, "questions", []))
    for number, question in enumerate(questions, start=1):
        prefix = f"{number}. " if len(questions) > 1 else ""
        lines.append(prefix + " ".join(str(question.text).split()))
        for index, choice in enumerate(question.choices):
            lines.append(f"   {string.ascii_lowercase[index]}) " + " ".join(str(choice).split()))
    return lines


class QuestionPrompt(Static):
    """The oldest waiting question of the chat's session; the next message answers it."""

    DEFAULT_CSS = """
    QuestionPrompt { display: none; height: auto; max-height: 14; padding: 0 1;
                     border: round $accent; }
    QuestionPrompt.-waiting { display: block; }
    """

    def __init__(self) -> None:
        super().__init__("")
        self.requests: list[Any] = []

    @property
    def current(self) -> Any | None:
        return self.requests[0] if self.requests else None

    def add(self, request: Any) -> None:
        if all(r.id != request.id for r in self.requests):
            self.requests.append(request)
        self._redraw()

    def withdraw(self, question_id: str) -> None:
        self.requests = [r for r in self.requests if r.id != question_id]
        self._redraw()

    def clear(self) -> None:
        self.requests = []
        self._redraw()

    def _redraw(self) -> None:
        request = self.current
        self.set_class(request is not None, "-waiting")
        if request is None:
            self.update("")
            return
        parts: list[Content | tuple[str, str] | str] = [("The agent asks:", "bold"), "\n"]
        parts.append(Content("\n".join(question_lines(request))))
        hint = "\nType your answer (a letter picks a choice) and press Enter."
        if len(self.requests) > 1:
            hint += f" {len(self.requests) - 1} more waiting."
        parts.append((hint, "dim"))
        self.update(Content.assemble(*parts))
