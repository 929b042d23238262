"""The Logs screen: habakkuk.log's records with the filters of `habakkuk logs`.

Three fields above the records: the lowest level (debug, info, warn, error), an age
(30m, 8h, 2d) and words to look for; the newest records are at the bottom and the list
follows the file every two seconds while the screen is shown. The records are read
through the runtime's logs service (`runtime.logs`), never from the file here. A field
that cannot be read says so on the status line and keeps the last good list.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Input, RichLog, Static

from habakkuk.engine.i18n import t
from habakkuk.engine.logread import LogFilter, level_number, parse_age, since_seconds_ago
from habakkuk.screens.base import PollingScreen
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.engine.logread import LogRecord

SHOWN = 500  # the newest records that pass the filters
LEVEL_STYLES = {"ERROR": "bold red", "CRITICAL": "bold red", "WARNING": "yellow", "DEBUG": "dim"}


def record_line(record: LogRecord) -> Text:
    """One record as the screen shows it: time, level, logger, message (and traceback)."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(record.time))
    level = "WARN" if record.level == "WARNING" else record.level
    line = Text(f"{stamp} ")
    line.append(f"{level:<5}", style=LEVEL_STYLES.get(record.level, ""))
    line.append(f" {record.logger}: ", style="dim")
    line.append(record.message)
    if record.exc:
        line.append("\n" + "\n".join("    " + p for p in record.exc.splitlines()), style="dim")
    return line


class LogsScreen(PollingScreen):
    """habakkuk.log, filtered by level, age and words; Esc goes back to the chat."""

    DEFAULT_CSS = """
    LogsScreen #logs-filters { height: auto; }
    LogsScreen #logs-filters Input { width: 1fr; }
    LogsScreen #logs-level, LogsScreen #logs-since { max-width: 18; }
    LogsScreen #logs-view { height: 1fr; border: none; }
    LogsScreen #logs-status { height: 1; color: $text-muted; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[Any]] = [
        Binding("ctrl+r", "reload", "Refresh", id="logs.refresh"),
        Binding("escape", "back", "Back", id="logs.back", show=False),
    ]
    refresh_seconds = 2.0

    def __init__(self) -> None:
        super().__init__(id="logs")
        self.wanted = LogFilter()
        self.records: list[LogRecord] = []  # shown now, oldest first
        self.bad = 0
        self._level = Input(placeholder=t("logs.screen.level"), id="logs-level")
        self._since = Input(placeholder=t("logs.screen.since"), id="logs-since")
        self._grep = Input(placeholder=t("logs.screen.grep"), id="logs-grep")
        self._view = RichLog(id="logs-view", wrap=True, markup=False, auto_scroll=True)
        self._status = Static("", id="logs-status")
        self._problem = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="logs-filters"):
            yield self._level
            yield self._since
            yield self._grep
        yield self._view
        yield self._status
        yield KeyFooter()

    # -- filters ---------------------------------------------------------------------------

    @on(Input.Changed)
    def _filters_changed(self, event: Input.Changed) -> None:
        event.stop()
        wanted = self._read_filters()
        if wanted is not None:
            self.wanted = wanted
            self.refresh_data()

    def _read_filters(self) -> LogFilter | None:
        """The fields as a filter; None (and the reason on the status line) for a bad one."""
        level, since_text, grep = self._level.value, self._since.value, self._grep.value
        try:
            number = level_number(level) if level.strip() else 0
        except ValueError:
            self._say_problem(t("logs.bad_level", value=level))
            return None
        since = None
        if since_text.strip():
            try:
                since = since_seconds_ago(parse_age(since_text))
            except ValueError:
                self._say_problem(t("logs.bad_since", value=since_text))
                return None
        self._problem = ""
        return LogFilter(level=number, since=since, grep=grep.strip())

    def _say_problem(self, text: str) -> None:
        self._problem = text
        self._status.update(Text(text, style="bold red"))

    # -- reading -----------------------------------------------------------------------------

    def refresh_data(self) -> None:
        if self._loaded and self.has_runtime:
            self._reload()

    def action_reload(self) -> None:
        self.refresh_data()

    def action_back(self) -> None:
        self.happ.action_go("chat")

    @work(exclusive=True, group="logs")
    async def _reload(self) -> None:
        wanted = self.wanted
        if wanted.since is not None and self._since.value.strip():
            # An age counts back from now, not from when it was typed.
            wanted = LogFilter(
                wanted.level, since_seconds_ago(parse_age(self._since.value)), wanted.grep
            )
        read = await self.read(lambda runtime: runtime.logs.read(wanted, SHOWN))
        if read is None:
            return
        self.bad = read.bad
        if read.records != self.records:
            self.records = read.records
            self._view.clear()
            for record in read.records:
                self._view.write(record_line(record))
        if not self._problem:
            status = t("logs.screen.count", count=len(self.records))
            if self.bad:
                status += " · " + t("logs.bad_lines", count=self.bad)
            self._status.update(status)
