"""The approvals screen: every waiting approval of this home, answerable by key.

It lists the runtime's `approvals.waiting()` (the list /api/approvals serves):
this terminal's own requests and chat approvals, also those a turn of another
process waits on (a `--serve` holding the Telegram account, its dashboard chat
or its attached terminal; all are recorded in control.db while they wait).
Other processes publish nothing on this bus, so
besides approval.* events the screen re-reads the list every two seconds while
it is shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.widgets import DataTable, Static

from habakkuk.conversation.answers import answer_named
from habakkuk.engine.i18n import t
from habakkuk.screens.base import PollingScreen, on_bus
from habakkuk.screens.bus_messages import ApprovalArrived
from habakkuk.widgets.approval_prompt import INPUT_SUMMARY_CHARS
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.engine.toolkit.approvals import Answer
    from habakkuk.engine.toolkit.waiting import WaitingApproval

# How often the list is read again while shown (approvals of other processes have no event).


def call_text(approval: WaitingApproval) -> str:
    """The call on one line, cut to the prompt's length."""
    text = approval.text
    if len(text) > INPUT_SUMMARY_CHARS:
        text = text[: INPUT_SUMMARY_CHARS - 1] + "…"
    return text


class ApprovalsScreen(PollingScreen):
    """A table of waiting approvals; y, a, n answer the highlighted one."""

    BINDINGS = [
        Binding("y", "answer('allow_once')", "Allow once", id="approvals.allow_once"),
        Binding("a", "answer('allow_session')", "Allow session", id="approvals.allow_session"),
        Binding("n", "answer('deny')", "Deny", id="approvals.deny"),
        Binding("enter", "open", "Open chat", id="approvals.open"),
    ]

    refresh_seconds = 2.0

    def __init__(self) -> None:
        super().__init__(id="approvals")
        self.rows: list[WaitingApproval] = []
        self._title = Static(t("tui.title.approvals"), classes="section-title")
        self._table: DataTable[str | Text] = DataTable(
            id="approval-table", cursor_type="row", zebra_stripes=True
        )
        self._detail = Static("", id="approval-detail")
        self._empty = Static(t("tui.empty.approvals"), classes="empty")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._empty  # at the top, where no toast covers it
        yield self._table
        yield self._detail
        yield KeyFooter()

    def on_mount(self) -> None:
        self._table.add_columns("tool", "from", "agent", "session", "input")
        self._table.focus()

    def refresh_data(self) -> None:
        self.reload()

    @on_bus(ApprovalArrived)
    def _approval_event(self, message: ApprovalArrived) -> None:
        self.reload()

    def reload(self) -> None:
        """Read the waiting approvals again (in a worker) and show them."""
        self._reload()

    @work(exclusive=True, group="reload")
    async def _reload(self) -> None:
        await self.load()

    async def load(self) -> None:
        """Show every waiting approval of this home, oldest first."""
        rows = await self.read(lambda runtime: runtime.approvals.waiting())
        if rows is None:
            return
        self.rows = rows
        table = self._table
        cursor = table.cursor_row
        table.clear()
        for approval in self.rows:
            table.add_row(
                Text(approval.tool),
                Text(approval.where),
                Text(approval.agent),
                Text(approval.session),
                Text(call_text(approval)[:120]),
            )
        if self.rows:
            table.move_cursor(row=min(max(cursor, 0), len(self.rows) - 1))
        self._empty.display = not self.rows
        self._table.display = bool(self.rows)
        self._show_detail()
        self.refresh_bindings()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        approval = self.selected()
        if approval is None:
            self._detail.update("")
            self._detail.display = False
            return
        parts: list[Content | tuple[str, str] | str] = [
            (approval.tool, "bold"),
            ": ",
            Content(call_text(approval)),
        ]
        if approval.reason:
            parts += ["\n", ("reviewer: ", "italic"), Content(approval.reason)]
        self._detail.update(Content.assemble(*parts))
        self._detail.display = True

    def selected(self) -> WaitingApproval | None:
        row = self._table.cursor_row
        if 0 <= row < len(self.rows):
            return self.rows[row]
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("answer", "open"):
            return bool(self.rows)
        return True

    def action_answer(self, answer: str) -> None:
        """Answer the highlighted request, wherever it waits (`answer`: the key's binding
        names the decision)."""
        approval = self.selected()
        decided = answer_named(answer)
        if approval is not None and decided is not None:
            self._answer(approval.id, decided)

    @work(group="answer")
    async def _answer(self, approval_id: str, answer: Answer) -> None:
        if not self.has_runtime:
            return
        if not await self.runtime.approvals.respond(approval_id, answer, by="terminal"):
            self.notify(t("tui.approval.gone"))
        await self.load()

    def action_open(self) -> None:
        """Show the request's session in the chat, with its prompt."""
        request = self.selected()
        if request is not None:
            self.happ.open_session(request.session)
