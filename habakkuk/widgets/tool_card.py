"""A tool call as a card: tool, title, status and time; Enter shows the full output.

Cards are paired with their call by call id: the stream announces the call
(turn.tool_call), the registry reports start and end (tool.start, tool.end), and
the full output is read from the transcript through the facade when expanded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len, set_cell_size
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from habakkuk.engine.i18n import known, t

if TYPE_CHECKING:
    from .backend import WidgetBackend

STATUS_MARKS = {
    "pending": "…",
    "waiting": "?",
    "running": "▶",
    "ok": "✓",
    "error": "✗",
    "denied": "⊘",
    "interrupted": "■",
    "not_run": "□",
}
# Outcomes of a call that never ran: no time is shown for them.
NEVER_RAN = frozenset({"denied", "not_run"})
# Outcomes drawn in the error colour.
FAILED = frozenset({"error", "denied", "interrupted", "not_run"})


def status_label(status: str) -> str:
    """How a status reads in the card's header, in the language in use ("waiting for
    approval"); a status no catalog names reads as itself."""
    key = f"tui.card.status.{status}"
    return t(key) if known(key) else status


class ToolCard(Widget, can_focus=True):
    """One tool call of a turn."""

    DEFAULT_CSS = """
    ToolCard { height: auto; margin: 0 0 1 1; padding: 0 1; border-left: outer $secondary; }
    ToolCard:focus { border-left: outer $accent; background: $boost; }
    ToolCard.-error { border-left: outer $error; }
    ToolCard > .header { height: 1; }
    ToolCard > .output { display: none; height: auto; max-height: 20; overflow-y: auto;
                         color: $text-muted; }
    ToolCard.-expanded > .output { display: block; }
    """
    BINDINGS = [Binding("enter", "toggle_output", "Output", id="card.toggle")]

    status: reactive[str] = reactive("pending")
    expanded: reactive[bool] = reactive(False)

    def __init__(
        self,
        call_id: str,
        tool: str,
        *,
        session: str,
        title: str = "",
        status: str = "pending",
        seconds: float | None = None,
    ) -> None:
        super().__init__(classes="tool-card")
        self.call_id = call_id
        self.tool = tool
        self.session = session
        self.title = title
        self.seconds = seconds
        self.preview = ""
        self._header = Static(classes="header")
        self._output = Static(classes="output")
        self.set_reactive(ToolCard.status, status)

    def compose(self) -> ComposeResult:
        yield self._header
        yield self._output

    def on_mount(self) -> None:
        self.set_class(self.status in FAILED, "-error")
        self._update_header()

    def started(self, title: str) -> None:
        """tool.start: the call began (an approval, if it needs one, comes next)."""
        self.title = title or self.title
        self.status = "running"

    def awaiting_approval(self, waiting: bool) -> None:
        """An approval prompt for this call is shown (True) or was answered (False)."""
        if waiting and self.status in ("pending", "running"):
            self.status = "waiting"
        elif not waiting and self.status == "waiting":
            self.status = "running"

    def ended(self, status: str, seconds: float | None, preview: str) -> None:
        """tool.end: its outcome (ok, error, denied, interrupted, not_run) and time."""
        self.seconds = seconds
        self.preview = preview
        self.status = status if status in STATUS_MARKS else "error"

    def attach(self, widget: Widget) -> None:
        """Show `widget` under the header (a delegated child's progress)."""
        if self.is_mounted:
            self.mount(widget, after=self._header)
        else:
            # A card mounted just now: its own queue runs this once its mount is done.
            self.call_later(self.attach, widget)

    def watch_status(self, status: str) -> None:
        self.set_class(status in FAILED, "-error")
        self._update_header()

    def on_resize(self, event: events.Resize) -> None:
        self._update_header()

    def _update_header(self) -> None:
        head = Content.assemble(
            (STATUS_MARKS.get(self.status, "?") + " ", "bold"), (self.tool, "bold")
        )
        tail = status_label(self.status)
        if self.seconds is not None and self.status not in NEVER_RAN:
            tail += f" {self.seconds:.1f}s"
        title = ""
        if self.title.strip():
            title = self.title.splitlines()[0][:200]
        # The status is what the card is for: a long title (a command) gives way to it,
        # cut with "…", so "waiting for approval" is never what runs off the edge.
        width = self.content_size.width  # the header's: it fills the card
        if title and width:
            room = width - head.cell_length - len(tail) - 4  # the two gaps of two cells
            title = title if cell_len(title) <= room else _cut(title, room)
        parts: list[Content | tuple[str, str] | str] = [head]
        if title:
            parts += ["  ", Content(title)]
        parts.append(("  " + tail, "dim"))
        self._header.update(Content.assemble(*parts))

    def action_toggle_output(self) -> None:
        """Show or hide the full output."""
        self.expanded = not self.expanded

    def watch_expanded(self, expanded: bool) -> None:
        self.set_class(expanded, "-expanded")
        if expanded:
            self._load_output()

    @work(exclusive=True, group="output")
    async def _load_output(self) -> None:
        runtime: WidgetBackend | None = getattr(self.app, "runtime", None)
        if runtime is None:
            return
        result = await runtime.sessions.tool_output(self.session, self.call_id)
        if result is None:
            text = self.preview or "(no result recorded yet)"
        else:
            text = result.text or "(empty output)"
        self._output.update(Content(text))


def _cut(text: str, cells: int) -> str:
    """`text` in at most `cells` cells, "…" marking the cut ("" when nothing fits)."""
    if cells < 2:
        return ""
    return set_cell_size(text, cells - 1).rstrip() + "…"
