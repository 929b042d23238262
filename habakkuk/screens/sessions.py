"""The sessions screen: recent and archived sessions, full-text search, open, fork, rename,
archive and restore, export.

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
from textual.widgets import DataTable, Input, Static

from habakkuk.engine.i18n import t
from habakkuk.engine.sessions import BOARD_ORIGIN, DELEGATE_ORIGIN
from habakkuk.screens.base import RuntimeScreen, on_bus
from habakkuk.screens.bus_messages import JobFinishedArrived, SessionRenamedArrived
from habakkuk.screens.text_prompt import Confirm, TextPrompt
from habakkuk.widgets.fit_table import FitTable
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.engine.sessions import SearchHit

EXPORT_FORMATS = ("md", "json", "html")
# How the list names where a session of the home's work came from (its origin).
ORIGIN_WORDS = {BOARD_ORIGIN: "board card", DELEGATE_ORIGIN: "sub-agent"}


def format_time(timestamp: float, timezone: str) -> str:
    """A session time in the configured timezone (the one the agent sees)."""
    try:
        zone = ZoneInfo(timezone)
    except (KeyError, ValueError):
        zone = ZoneInfo("UTC")
    return datetime.fromtimestamp(timestamp, zone).strftime("%Y-%m-%d %H:%M")


class SessionsScreen(RuntimeScreen):
    """Find a session and open it; fork, rename, archive (asks first) or export it.

    `v` shows the archived sessions instead, where `u` restores one; `a` also lists the
    sessions board cards and sub-agents ran in (left out by default: the user's chats
    first). A reload keeps the cursor on the session it was on. Esc leaves a search or
    the archived view, and from the recent list returns to the chat.
    """

    BINDINGS = [
        Binding("slash", "search", "Search", id="sessions.search"),
        Binding("enter", "open", "Open", id="sessions.open", show=True),
        Binding("r", "rename", "Rename", id="sessions.rename"),
        Binding("x", "archive", "Archive", id="sessions.archive"),
        Binding("u", "unarchive", "Restore", id="sessions.unarchive"),
        Binding("v", "toggle_archived", "Archived", id="sessions.archived"),
        Binding("a", "toggle_work", "All", id="sessions.work"),
        Binding("e", "export", "Export", id="sessions.export"),
        Binding("f", "fork", "Fork", id="sessions.fork"),
        Binding("escape", "back", "Back", id="sessions.back", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="sessions")
        self.query_text = ""
        self.archived = False  # showing the archived sessions instead of the recent ones
        self.with_work = False  # also listing board cards' and sub-agents' sessions
        self.row_sessions: list[str] = []
        self.row_titles: dict[str, str] = {}
        self._title = Static(t("tui.title.sessions_recent"), classes="section-title")
        self._search = Input(placeholder=t("tui.sessions.search_hint"), id="search")
        # At 80 cells a long title or snippet gives way, so the session id stays in view.
        self._table = FitTable(id="session-table", shrink={"match": 12, "title": 16})
        self._empty = Static("", classes="empty")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._search
        yield self._empty  # at the top, where no toast covers it
        yield self._table
        yield KeyFooter()

    def on_mount(self) -> None:
        self._empty.display = False
        self._table.focus()

    def runtime_ready(self) -> None:
        self.refresh_list()

    @on_bus(JobFinishedArrived)
    def _job_finished(self, message: JobFinishedArrived) -> None:
        # A finished turn changes titles and order; cheap to reload the recent list.
        if not self.query_text:
            self.refresh_list()

    @on_bus(SessionRenamedArrived)
    def _renamed(self, message: SessionRenamedArrived) -> None:
        # A background title (or a rename elsewhere) changes what the list shows.
        if not self.query_text:
            self.refresh_list()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "unarchive":
            return self.archived
        if action in ("archive", "fork"):
            return not self.archived
        return True

    # -- listing -----------------------------------------------------------------------

    def refresh_list(self, keep: str | None = None) -> None:
        """Reload the list shown (recent, archived or the search), the cursor staying on
        `keep` (default: the highlighted session) when it is still listed."""
        self._refresh(keep or self.selected(), self._table.cursor_row)

    @work(exclusive=True, group="list")
    async def _refresh(self, keep: str | None, row: int) -> None:
        timezone = self.runtime.config.timezone
        table = self._table
        rows: list[tuple[str, str, list[str | Text]]] = []  # (session, title, cells)
        if self.query_text:
            found = await self.runtime.sessions.search_sessions(self.query_text, limit=100)
            # The best match of each session: this is a picker of sessions, not of messages.
            best: dict[str, SearchHit] = {}
            for hit in found:
                best.setdefault(hit.session, hit)
            columns: tuple[str, ...] = ("title", "when", "match")
            for hit in best.values():
                title = _one_line(hit.title) or "(untitled)"
                cells: list[str | Text] = [
                    Text(title),
                    format_time(hit.at, timezone),
                    Text(_one_line(hit.snippet)),
                ]
                rows.append((hit.session, hit.title, cells))
            self._title.update(
                Content(t("tui.title.sessions_search", query=self.query_text, found=len(rows)))
            )
            empty = t("tui.empty.sessions_search")
        else:
            sessions = await self.runtime.sessions.list_sessions(
                limit=200, archived=self.archived, include_work=self.with_work
            )
            columns = ("updated", "agent", "title", "session")
            if self.with_work:
                columns += ("from",)  # which are a card's or a sub-agent's
            for s in sessions:
                cells = [
                    format_time(s.updated_at, timezone),
                    Text(s.agent),
                    Text(_one_line(s.title) or "(untitled)"),
                    Text(s.id),
                    Text(ORIGIN_WORDS.get(s.origin, ""), style="dim"),
                ]
                rows.append((s.id, s.title, cells[: len(columns)]))
            which = t(
                "tui.title.sessions_archived" if self.archived else "tui.title.sessions_recent"
            )
            if self.with_work:
                which += t("tui.title.sessions_with_work")
            else:
                which += t("tui.title.sessions_without_work")
            if self.archived:
                self._title.update(which + " · " + t("tui.title.sessions_archived_keys"))
                empty = t("tui.empty.sessions_archived")
            else:
                self._title.update(which)
                empty = t("tui.empty.sessions")
        self.row_sessions = [session for session, _, _ in rows]
        self.row_titles = {session: title for session, title, _ in rows}
        table.fill(columns, [(session, cells) for session, _, cells in rows])
        if rows:
            at = self.row_sessions.index(keep) if keep in self.row_sessions else row
            table.move_cursor(row=min(max(at, 0), len(rows) - 1))
        empty = "" if rows else empty
        self._empty.update(empty)
        self._empty.display = bool(empty)
        self.refresh_bindings()

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

    def action_back(self) -> None:
        """Esc: from a search or the archived view back to the recent list; from the
        recent list back to the chat."""
        if self.query_text or self.archived or self.focused is self._search:
            self.query_text = ""
            self.archived = False
            self._search.value = ""
            self.refresh_list()
            self._table.focus()
            return
        self.happ.action_go("chat")

    def action_toggle_work(self) -> None:
        """List the sessions of board cards and sub-agents too, or the user's only again."""
        if self.focused is self._search:
            return
        self.with_work = not self.with_work
        self.refresh_list()

    def action_toggle_archived(self) -> None:
        """Show the archived sessions, or the recent ones again."""
        if self.focused is self._search:
            return
        self.archived = not self.archived
        self.query_text = ""
        self._search.value = ""
        self.refresh_list()

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

        current = _one_line(self.row_titles.get(session, ""))
        self.app.push_screen(TextPrompt(f"New title for {session}:", current, check=check), done)

    @work(group="edit")
    async def _rename(self, session: str, title: str) -> None:
        await self.runtime.sessions.rename_session(session, title)
        self.notify(t("tui.sessions.renamed", session=session), markup=False)
        self.refresh_list(keep=session)

    def action_archive(self) -> None:
        """Archive the highlighted session after a yes (v lists archived ones, u restores)."""
        session = self.selected()
        if session is None:
            return
        title = _one_line(self.row_titles.get(session, "")) or session

        def done(yes: bool | None) -> None:
            if yes:
                self._archive(session, True)

        self.app.push_screen(
            Confirm(t("tui.sessions.archive_confirm", title=repr(title))),
            done,
        )

    def action_unarchive(self) -> None:
        """Restore the highlighted archived session to the recent list."""
        session = self.selected()
        if session is not None and self.archived:
            self._archive(session, False)

    @work(group="edit")
    async def _archive(self, session: str, archived: bool) -> None:
        await self.runtime.sessions.archive_session(session, archived)
        done = "tui.sessions.archived" if archived else "tui.sessions.restored"
        self.notify(t(done, session=session), markup=False)
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
            fork = await self.runtime.sessions.fork_session(session)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.notify(t("tui.sessions.forked", session=session, fork=fork.id), markup=False)
        self.happ.open_session(fork.id)

    def action_export(self) -> None:
        session = self.selected()
        if session is None:
            return
        default = self.runtime.sessions.export_default(session, "md")

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
            where = await self.runtime.sessions.save_export(session, fmt, path)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.notify(t("tui.sessions.wrote", path=where), markup=False)


def _one_line(text: str) -> str:
    return " ".join(text.split())
