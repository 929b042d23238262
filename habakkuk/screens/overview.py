"""The overview: queue depth, jobs running here, what is scheduled, errors, channel health."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from habakkuk.screens.base import RuntimeScreen

if TYPE_CHECKING:
    from habakkuk.engine.events import Event

REFRESH_KINDS = {"turn.start", "turn.end", "job.finished"}


def due_in(seconds: float) -> str:
    """How long until a job is due, in the largest unit that reads well ("in 4m")."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"in {seconds:.0f}s"
    if seconds < 90 * 60:
        return f"in {seconds / 60:.0f}m"
    if seconds < 36 * 3600:
        return f"in {seconds / 3600:.1f}h"
    return f"in {seconds / 86400:.1f}d"


class OverviewScreen(RuntimeScreen):
    """What the runtime is doing; refreshed as jobs start and finish (r reloads)."""

    BINDINGS = [Binding("r", "reload", "Refresh", id="overview.refresh")]

    def __init__(self) -> None:
        super().__init__(id="overview")
        self._queue = Static("", id="queue-summary")
        self._running_table: DataTable[str | Text] = DataTable(id="running", cursor_type="row")
        self._scheduled: DataTable[str | Text] = DataTable(id="scheduled", cursor_type="row")
        self._errors: DataTable[str | Text] = DataTable(id="errors", cursor_type="row")
        self._channels_title = Static("Channels", classes="section-title")
        self._channels: DataTable[str | Text] = DataTable(id="channels", cursor_type="row")
        self.queued = 0
        self.running_count = 0

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("Queue", classes="section-title")
            yield self._queue
            yield Static("Running here", classes="section-title")
            yield self._running_table
            yield Static("Scheduled", classes="section-title")
            yield self._scheduled
            yield Static("Recent errors", classes="section-title")
            yield self._errors
            yield self._channels_title
            yield self._channels
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._running_table.add_columns("kind", "job", "session", "attempt")
        self._scheduled.add_columns("due", "kind", "job", "why")
        self._errors.add_columns("kind", "job", "error")
        self._channels.add_columns("account", "type", "state", "detail")
        self._channels.styles.height = "auto"
        self._running_table.styles.height = "auto"
        self._errors.styles.height = "auto"
        self._scheduled.styles.height = "auto"

    def runtime_ready(self) -> None:
        self.action_reload()

    def on_screen_resume(self) -> None:
        if self.has_runtime:
            self.action_reload()

    async def bus_event(self, event: Event) -> None:
        if event.kind in REFRESH_KINDS:
            self.action_reload()

    def action_reload(self) -> None:
        """Read the queue and the failures again."""
        self._reload()

    @work(exclusive=True, group="reload")
    async def _reload(self) -> None:
        depth = await self.runtime.queue_depth()
        failures = await self.runtime.recent_failures(10)
        upcoming = await self.runtime.upcoming_jobs(10)
        running = self.runtime.running_jobs()
        self.queued = sum(n for (_, status), n in depth.items() if status == "queued")
        self.running_count = sum(n for (_, status), n in depth.items() if status == "running")
        lines = [
            f"{self.queued} queued · {self.running_count} running (every process of this home)"
        ]
        for (kind, status), count in sorted(depth.items()):
            lines.append(f"  {kind:<12} {status:<8} {count}")
        self._queue.update(Text("\n".join(lines)))
        self._running_table.clear()
        for job in running:
            self._running_table.add_row(
                Text(job.kind),
                Text(job.id),
                Text(str(job.payload.get("session", ""))),
                str(job.attempts),
            )
        if not running:
            self._running_table.add_row("", Text("nothing running in this process"), "", "")
        self._scheduled.clear()
        now = time.time()
        for job in upcoming:
            if job.attempts:
                error = " ".join((job.error or "").split())
                why = f"retry {job.attempts + 1} of {job.max_attempts}: {error}"
            else:
                why = "timed"
            self._scheduled.add_row(
                Text(due_in(job.run_after - now)), Text(job.kind), Text(job.id), Text(why[:120])
            )
        if not upcoming:
            self._scheduled.add_row("", "", Text("nothing scheduled"), "")
        self._errors.clear()
        for job in failures:
            error = " ".join((job.error or "").split())
            self._errors.add_row(Text(job.kind), Text(job.id), Text(error[:200]))
        if not failures:
            self._errors.add_row("", Text("no failed jobs"), "")
        # Channels appear only when the config has some (no empty section otherwise).
        configured = bool(getattr(self.runtime.config, "channels", None))
        self._channels_title.display = self._channels.display = configured
        if configured:
            health = await self.runtime.channel_health()
            self._channels.clear()
            for account, status in sorted(health.items()):
                detail = " ".join(str(status.detail or "").split())
                if status.restarts:
                    detail = f"{status.restarts} restart(s) {detail}".strip()
                self._channels.add_row(
                    Text(account), Text(status.type), Text(status.state), Text(detail[:120])
                )
            for account in sorted(set(self.runtime.config.channels) - set(health)):
                self._channels.add_row(Text(account), "", Text("not started"), "")
