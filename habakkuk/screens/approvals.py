"""The approvals screen: every waiting approval of this process, answerable by key."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.widgets import DataTable, Footer, Static

from habakkuk.screens.base import RuntimeScreen
from habakkuk.widgets.approval_prompt import input_summary

if TYPE_CHECKING:
    from habakkuk.engine.events import Event
    from habakkuk.engine.toolkit.approvals import ApprovalRequest


class ApprovalsScreen(RuntimeScreen):
    """A table of waiting approvals; y, a, n answer the highlighted one."""

    BINDINGS = [
        Binding("y", "answer('allow_once')", "Allow once", id="approvals.allow_once"),
        Binding("a", "answer('allow_session')", "Allow session", id="approvals.allow_session"),
        Binding("n", "answer('deny')", "Deny", id="approvals.deny"),
        Binding("enter", "open", "Open chat", id="approvals.open"),
    ]

    def __init__(self) -> None:
        super().__init__(id="approvals")
        self.rows: list[ApprovalRequest] = []
        self._title = Static("Waiting approvals", classes="section-title")
        self._table: DataTable[str | Text] = DataTable(
            id="approval-table", cursor_type="row", zebra_stripes=True
        )
        self._detail = Static("", id="approval-detail")
        self._empty = Static("Nothing is waiting for approval.", classes="empty")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._table
        yield self._detail
        yield self._empty
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._table.add_columns("tool", "agent", "session", "input")
        self._table.focus()

    def runtime_ready(self) -> None:
        self.reload()

    def on_screen_resume(self) -> None:
        if self.has_runtime:
            self.reload()

    async def bus_event(self, event: Event) -> None:
        if event.kind.startswith("approval."):
            self.reload()

    def reload(self) -> None:
        """Show the hub's waiting requests, oldest first."""
        self.rows = list(self.runtime.approvals.pending)
        table = self._table
        cursor = table.cursor_row
        table.clear()
        for request in self.rows:
            table.add_row(
                Text(request.tool),
                Text(request.agent),
                Text(request.session),
                Text(input_summary(request)[:120]),
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
        request = self.selected()
        if request is None:
            self._detail.update("")
            self._detail.display = False
            return
        parts: list[Content | tuple[str, str] | str] = [
            (request.tool, "bold"),
            ": ",
            Content(input_summary(request)),
        ]
        if request.reason:
            parts += ["\n", ("reviewer: ", "italic"), Content(request.reason)]
        self._detail.update(Content.assemble(*parts))
        self._detail.display = True

    def selected(self) -> ApprovalRequest | None:
        row = self._table.cursor_row
        if 0 <= row < len(self.rows):
            return self.rows[row]
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("answer", "open"):
            return bool(self.rows)
        return True

    def action_answer(self, answer: str) -> None:
        """Answer the highlighted request."""
        request = self.selected()
        if request is None:
            return
        if not self.runtime.approvals.answer(request.id, answer, by="terminal"):  # type: ignore[arg-type]
            self.notify("That request is no longer waiting.")
        self.reload()

    def action_open(self) -> None:
        """Show the request's session in the chat, with its prompt."""
        request = self.selected()
        if request is not None:
            self.happ.open_session(request.session)
