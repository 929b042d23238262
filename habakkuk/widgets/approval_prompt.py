"""The approval prompt: a tool call waits for one key (y once, a for the session, n deny).

Esc leaves the request waiting and returns focus to the composer. The prompt
shows the oldest waiting request of the chat's session and how many more wait;
a request disappears when it is answered anywhere or withdrawn (its turn stopped).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.content import Content
from textual.message import Message

from habakkuk.conversation.answers import answer_named
from habakkuk.engine.i18n import t

from .waiting_prompt import WaitingPrompt

if TYPE_CHECKING:
    from habakkuk.engine.toolkit.approvals import Answer, ApprovalRequest

    from .backend import WidgetBackend

INPUT_SUMMARY_CHARS = 300


def input_summary(request: ApprovalRequest) -> str:
    """The call's input on one or two lines: the title, else compact JSON, cut."""
    text = request.summary or json.dumps(request.input, ensure_ascii=False)
    text = " ".join(text.split())
    if len(text) > INPUT_SUMMARY_CHARS:
        text = text[: INPUT_SUMMARY_CHARS - 1] + "…"
    return text


class ApprovalPrompt(WaitingPrompt["ApprovalRequest"], can_focus=True):
    """Waiting approvals of one session, oldest first; keys answer the first."""

    DEFAULT_CSS = """
    ApprovalPrompt { display: none; height: auto; max-height: 8; padding: 0 1;
                     border: round $warning; }
    ApprovalPrompt.-waiting { display: block; }
    ApprovalPrompt:focus { border: round $accent; background: $boost; }
    """
    BINDINGS = [
        Binding("y", "answer('allow_once')", "Allow once", id="approval.allow_once"),
        Binding("a", "answer('allow_session')", "Allow session", id="approval.allow_session"),
        Binding("n", "answer('deny')", "Deny", id="approval.deny"),
        Binding("escape", "later", "Later", id="approval.later"),
    ]

    class Answered(Message):
        """The user answered (or put off) the prompt; the chat moves focus."""

        def __init__(self, approval_id: str | None, answer: Answer | None) -> None:
            super().__init__()
            self.approval_id = approval_id
            self.answer = answer

    def describe(self, request: ApprovalRequest) -> Content:
        # The question is one catalog line with the tool's name in it (a translation puts
        # it where its grammar wants), shown reversed as before.
        before, _, after = t("tui.approval.ask", tool="\0").partition("\0")
        parts: list[Any] = [
            (before, "bold"),
            (request.tool, "bold reverse"),
            (after + "  ", "bold"),
            Content(input_summary(request)),
        ]
        if request.reason:
            parts += ["\n", (t("tui.approval.reviewer") + " ", "italic"), Content(request.reason)]
        more = len(self.requests) - 1
        keys = "\n" + t("tui.approval.keys")
        if more:
            keys += " · " + t("tui.more_waiting", count=more)
        parts.append((keys, "dim"))
        return Content.assemble(*parts)

    async def action_answer(self, answer: str) -> None:
        """Answer the shown request through the approvals service's one answer path;
        `answer` names the decision (a key's binding, or a typed word already read)."""
        request = self.current
        decided = answer_named(answer)
        if request is None or decided is None:
            return
        runtime: WidgetBackend | None = getattr(self.app, "runtime", None)
        if runtime is not None:
            await runtime.approvals.respond(request.id, decided, by="terminal")
        self.withdraw(request.id)
        self.post_message(self.Answered(request.id, decided))

    def action_later(self) -> None:
        """Esc: leave it waiting and go back to typing."""
        self.post_message(self.Answered(None, None))
