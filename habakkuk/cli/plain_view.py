"""What the plain chat prints: the streamed reply and every state change as one line.

For a dumb terminal, a pipe or a screen reader: no escape sequence, no spinner, no line
rewritten in place. The reply's text is written as it streams; anything else (a state
change, a tool call, a prompt, a command's answer) starts on a line of its own, so a
screen reader reads each once and a pipe gets whole lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.events import TurnEnded
    from habakkuk.engine.toolkit.approvals import Answer, ApprovalRequest
    from habakkuk.tools.clarify import ClarifyRequest

# A tool's error as shown on its line: enough to tell what failed.
PREVIEW_CHARS = 200


class PlainView:
    """The chat's output stream, one line per state change."""

    def __init__(self, out: TextIO, *, prompt: bool = False) -> None:
        """`prompt`: show "> " while the chat waits for the next message (a terminal)."""
        self._out = out
        self._prompt = prompt
        self._open = False  # a streamed reply's last line has no newline yet
        self._prompted = False

    def text(self, piece: str) -> None:
        """A piece of the reply as it streams."""
        if piece:
            self._write(piece)
            self._open = not piece.endswith("\n")

    def line(self, text: str) -> None:
        """`text` on lines of its own (after the streamed reply's last line)."""
        if self._open:
            self._write("\n")
            self._open = False
        self._write(text + "\n")

    def prompt(self) -> None:
        """Show that the chat waits for the next message (once, and only on a terminal)."""
        if self._prompt and not self._prompted:
            self.line("")  # a blank line between the last answer and the prompt
            self._out.write("> ")
            self._out.flush()
            self._prompted = True

    def _write(self, text: str) -> None:
        self._prompted = False
        self._out.write(text)
        self._out.flush()

    # -- the lines -------------------------------------------------------------------

    def welcome(self, agent: str, session: str | None) -> None:
        """The first lines: whom the chat is with, and how to use it."""
        if session:
            self.line(t("plain.welcome_session", agent=agent, session=session))
        else:
            self.line(t("plain.welcome", agent=agent))
        self.line(t("plain.how"))

    def thinking(self) -> None:
        """A turn started (once per attempt)."""
        self.line(t("plain.thinking"))

    def tool(self, tool: str, title: str) -> None:
        """A tool call started: `[tool] name: title` on one line."""
        self.line(t("plain.tool", tool=tool, title=" ".join(title.split())))

    def tool_failed(self, tool: str, preview: str) -> None:
        """A tool call ended in an error (denied, not run, failed)."""
        self.line(
            t("plain.tool_failed", tool=tool, error=" ".join(preview.split())[:PREVIEW_CHARS])
        )

    def retrying(self) -> None:
        """The model call is retried: what streamed so far starts again."""
        self.line(t("plain.retrying"))

    def approval(self, request: ApprovalRequest) -> None:
        """A tool call waits for the person: what it is, then the y/a/n prompt."""
        summary = " ".join(request.summary.split())
        self.line(t("plain.approval", tool=request.tool, summary=summary))
        if request.reason:
            self.line(t("plain.approval_reason", reason=request.reason))
        self.line(t("plain.approval_prompt"))

    def approval_again(self) -> None:
        """The line typed answered nothing: the prompt again, shorter."""
        self.line(t("plain.approval_again"))

    def answered(self, answer: Answer) -> None:
        """The approval was answered here."""
        self.line(t(f"plain.answered.{answer}"))

    def approval_gone(self) -> None:
        """The approval waiting here was answered elsewhere, timed out or stopped."""
        self.line(t("plain.approval_gone"))

    def question(self, request: ClarifyRequest) -> None:
        """The agent asks a question (clarify): it, its choices, then the prompt."""
        self.line(t("plain.question"))
        self.line(request.render())
        self.line(t("plain.question_prompt"))

    def question_answered(self) -> None:
        """The typed line went to the agent as the answer."""
        self.line(t("plain.question_answered"))

    def ended(self, event: TurnEnded, *, streamed: bool) -> None:
        """The turn's end: its reply when none of it streamed, then its state."""
        if event.status == "done":
            if event.reply and not streamed:
                self.line(event.reply)
            self.line(t("plain.done"))
        elif event.status == "stopped":
            self.line(t("plain.stopped"))
        else:
            self.failed(event.error or event.status)

    def failed(self, reason: str) -> None:
        """The turn failed: `Failed: reason`."""
        self.line(t("plain.failed", reason=reason))

    def stopped(self) -> None:
        """The turn was stopped."""
        self.line(t("plain.stopped"))

    def stopping(self) -> None:
        """Ctrl-C during a turn: it is being stopped; a second one quits."""
        self.line(t("plain.stopping"))
