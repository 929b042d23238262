"""The sessions screen: recent sessions, full-text search, open, fork, rename, archive, export.

`habakkuk --resume` opens the app here, as a picker: Enter opens a session in the
chat, and a turn it left running continues there.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.widgets import DataTable, Footer, Input, Static

from habakkuk.screens.base import RuntimeScreen
from habakkuk.screens.text_prompt import TextPrompt

if TYPE_CHECKING:
    from habakkuk.engine.events import Event
    from habakkuk.engine.sessions import SearchHit

EXPORT_FORMATS = ("md", "json", "html")


def format_time(timestamp: float, timezone: str) -> str:
    """A session time in the configured timezone (the one the agent sees)."""
    try:
        zone = ZoneInfo(timezone)
    except (KeyError, ValueError):
        zone = ZoneInfo("UTC")
    return datetime.fromtimestamp(timestamp, zone).strftime("%Y-%m-%d %H:%M")


class SessionsScreen(RuntimeScreen):
    """Find a session and open it; fork, rename, archive or export it."""

    BINDINGS = [
        Binding("slash", "search", "Search", id="sessions.search"),
        Binding("enter", "open", "Open", id="sessions.open", show=True),
        Binding("r", "rename", "Rename", id="sessions.rename"),
        Binding("x", "archive", "Archive", id="sessions.archive"),
        Binding("e", "export", "Export", id="sessions.export"),
        Binding("f", "fork", "Fork", id="sessions.fork"),
        Binding("escape", "recent", "Recent", id="sessions.recent", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="sessions")
        self.query_text = ""
        self.row_sessions: list[str] = []
        self._title = Static("Recent sessions", classes="section-title")
        self._search = Input(placeholder="Search all sessions, Enter to search", id="search")
        self._table: DataTable[str | Text] = DataTable(
            id="session-table", cursor_type="row", zebra_stripes=True
        )
        self._empty = Static("", classes="empty")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._search
        yield self._table
        yield self._empty
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._empty.display = False
        self._table.focus()

    def runtime_ready(self) -> None:
        self.refresh_list()

    async def bus_event(self, event: Event) -> None:
        # A finished turn changes titles and order; cheap to reload the recent list.
        if event.kind == "job.finished" and not self.query_text:
            self.refresh_list()

    # -- listing -----------------------------------------------------------------------

    @work(exclusive=True, group="list")
    async def refresh_list(self) -> None:
        """Reload the recent sessions (or the current search)."""
        timezone = self.runtime.config.timezone
        table = self._table
        if self.query_text:
            found = await self.runtime.search_sessions(self.query_text, limit=100)
            # The best match of each session: this is a picker of sessions, not of messages.
            best: dict[str, SearchHit] = {}
            for hit in found:
                best.setdefault(hit.session, hit)
            hits = list(best.values())
            self._title.update(Content(f"Search: {self.query_text}  ({len(hits)} found)"))
            table.clear(columns=True)
            table.add_columns("session", "when", "match")
            self.row_sessions = []
            for hit in hits:
                table.add_row(
                    Text(hit.session), format_time(hit.at, timezone), Text(_one_line(hit.snippet))
                )
                self.row_sessions.append(hit.session)
            empty = "Nothing found. Esc shows recent sessions." if not hits else ""
        else:
            sessions = await self.runtime.list_sessions(limit=200)
            self._title.update("Recent sessions")
            table.clear(columns=True)
            table.add_columns("updated", "agent", "title", "session")
            self.row_sessions = []
            for s in sessions:
                table.add_row(
                    format_time(s.updated_at, timezone),
                    Text(s.agent),
                    Text(_one_line(s.title) or "(untitled)"),
                    Text(s.id),
                )
                self.row_sessions.append(s.id)
            empty = "No sessions yet. Ctrl+T goes to the chat." if not sessions else ""
        self._empty.update(empty)
        self._empty.display = bool(empty)

    def selected(self) -> str | None:
        """The highlighted session's id."""
        row = self._table.cursor_row
        if not self.row_sessions or row < 0 or row >= len(self.row_sessions):
            return None
        return self.row_sessions[row]

    # -- actions -------------------------------------------------------------------------

    def action_search(self) -> None:
        self._search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_text = event.value.strip()
        self.refresh_list()
        self._table.focus()

    def action_recent(self) -> None:
        """Esc: back to the recent list."""
        self.query_text = ""
        self._search.value = ""
        self.refresh_list()
        self._table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        """Open the highlighted session in the chat."""
        if self.focused is self._search:
            return
        session = self.selected()
        if session is not None:
            self.happ.open_session(session)

    def action_rename(self) -> None:
        session = self.selected()
        if session is None:
            return

        def check(value: str) -> str | None:
            return "A title cannot be empty." if not value else None

        def done(title: str | None) -> None:
            if title:
                self._rename(session, title)

        self.app.push_screen(TextPrompt(f"New title for {session}:", check=check), done)

    @work(group="edit")
    async def _rename(self, session: str, title: str) -> None:
        await self.runtime.rename_session(session, title)
        self.notify(f"Renamed {session}.", markup=False)
        self.refresh_list()

    def action_archive(self) -> None:
        session = self.selected()
        if session is not None:
            self._archive(session)

    @work(group="edit")
    async def _archive(self, session: str) -> None:
        await self.runtime.archive_session(session, True)
        self.notify(f"Archived {session}.", markup=False)
        self.refresh_list()

    def action_fork(self) -> None:
        """Copy the highlighted session into a new one and continue there in the chat."""
        session = self.selected()
        if session is not None:
            self._fork(session)

    @work(group="edit")
    async def _fork(self, session: str) -> None:
        from habakkuk.engine.errors import HabakkukError

        try:
            fork = await self.runtime.fork_session(session)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.notify(f"Forked {session} into {fork.id}.", markup=False)
        self.happ.open_session(fork.id)

    def action_export(self) -> None:
        session = self.selected()
        if session is None:
            return
        default = self.runtime.export_default(session, "md")

        def check(value: str) -> str | None:
            if Path(value).suffix.lstrip(".") not in EXPORT_FORMATS:
                return "The file name must end in .md, .json or .html."
            return None

        def done(path: str | None) -> None:
            if path:
                self._export(session, path)

        self.app.push_screen(
            TextPrompt("Export to (.md, .json or .html):", default, check=check), done
        )

    @work(group="edit")
    async def _export(self, session: str, path: str) -> None:
        from habakkuk.engine.errors import HabakkukError

        fmt = Path(path).suffix.lstrip(".")
        try:
            where = await self.runtime.save_export(session, fmt, path)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.notify(f"Wrote {where}", markup=False)


def _one_line(text: str) -> str:
    return " ".join(text.split())
