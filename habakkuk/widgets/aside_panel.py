"""The chat screen's aside panel: /btw's answer beside the conversation, until Esc.

The answer came from a throwaway session (services/aside.py), so it is shown here and
never added to the conversation's view.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static

from habakkuk.engine.i18n import t


class AsidePanel(VerticalScroll):
    """The latest /btw question and its answer; hidden until there is one."""

    DEFAULT_CSS = """
    AsidePanel {
        dock: right; width: 45%; height: 1fr; display: none;
        border-left: tall $secondary; padding: 0 1; background: $surface;
    }
    AsidePanel.-shown { display: block; }
    AsidePanel > #aside-title { text-style: bold; color: $secondary; }
    AsidePanel > #aside-question { color: $text-muted; margin-bottom: 1; }
    """

    def __init__(self) -> None:
        super().__init__(id="aside")
        self.question = ""
        self.answer = ""

    def compose(self) -> ComposeResult:
        yield Static(t("btw.panel_title"), id="aside-title")
        yield Static("", id="aside-question", markup=False)
        yield Markdown("", id="aside-answer")

    @property
    def shown(self) -> bool:
        """Whether an answer is on screen."""
        return self.has_class("-shown")

    async def show(self, question: str, answer: str) -> None:
        """Show `answer` to `question` (replacing the one shown)."""
        self.question, self.answer = question, answer
        self.query_one("#aside-question", Static).update(question)
        await self.query_one("#aside-answer", Markdown).update(answer)
        self.add_class("-shown")
        self.scroll_home(animate=False)

    def close(self) -> None:
        """Hide the panel (the chat screen's Esc)."""
        self.remove_class("-shown")
