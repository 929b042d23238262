"""The Schedules screen: every schedule with its next three fire times, last status and
output, failure streak; the highlighted one's slots beside the list (ran, failed,
skipped and why, delivered or not), so nothing that did not run is silent.

Keys: `a` adds a prompt schedule (a form that shows the next fire times as `when` is
typed), Enter or `r` runs the highlighted one now, `p` pauses or resumes it, `d` deletes
it after a yes, `o` opens its newest run's session in the chat. Every call goes through
the schedules service (`runtime.schedules`, a SchedulesAccess) in a worker; the screen
never opens control.db. A refusal of the service is a notice, never a crash.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Static

from habakkuk.engine.errors import HabakkukError
from habakkuk.screens.base import RuntimeScreen
from habakkuk.screens.schedule_form import ScheduleForm, fire_times_text
from habakkuk.screens.text_prompt import Confirm
from habakkuk.widgets.fit_table import FitTable, Row
from habakkuk.widgets.footer import KeyFooter
from habakkuk.widgets.words import counted
from habakkuk.work.schedule_views import slot_outcome

if TYPE_CHECKING:
    from habakkuk.work.schedule_types import NewSchedule, Schedule, SchedulesAccess, SlotRun

T = TypeVar("T")

PALETTE = (
    ("Schedules: add schedule", "A prompt on a timetable (a)", "add"),
    ("Schedules: run now", "Queue one extra run of the schedule (enter, r)", "run"),
    ("Schedules: pause or resume", "Pause the schedule, or resume it from now (p)", "pause_resume"),
    ("Schedules: delete schedule", "Delete the schedule (d)", "delete"),
    ("Schedules: open run", "The newest run's session in the chat (o)", "open_run"),
)
COLUMNS = ("name", "when", "next", "last", "streak", "agent")
RUNS_SHOWN = 20
FIRST_PAGE = 60  # rows painted before the rest are added: more than a screenful
OUTPUT_SHOWN = 1200
STATUS_STYLES = {
    "ran": "green",
    "failed": "bold red",
    "interrupted": "bold red",
    "delivery_failed": "yellow",
}


def status_cell(schedule: Schedule) -> Text:
    """The last status, red for an error, yellow for a skipped or undelivered slot."""
    status = schedule.last_status or "—"
    style = "dim"
    if status.startswith(("error", "interrupted")):
        style = "bold red"
    elif status.startswith(("skipped", "delivery failed")):
        style = "yellow"
    elif status == "ok":
        style = "green"
    return Text(status.splitlines()[0][:40], style=style)


def streak_cell(schedule: Schedule) -> Text:
    streak = schedule.fail_streak
    return Text(str(streak) if streak else "", style="bold red" if streak >= 3 else "yellow")


def run_line(run: SlotRun, zone: ZoneInfo) -> Text:
    """One slot: when, and what happened in the words every surface uses (ran, delivered;
    skipped: down; failed: ...)."""
    when = dt.datetime.fromtimestamp(run.slot, zone).strftime("%a %m-%d %H:%M")
    line = Text(f"{when}  ")
    line.append(slot_outcome(run), style=STATUS_STYLES.get(run.status, "yellow"))
    if run.extra:
        line.append(" (run now)", style="dim")
    return line


class SchedulesScreen(RuntimeScreen):
    """Every schedule of the home: `a` adds, Enter or `r` runs now, `p` pauses or resumes,
    `d` deletes (asks first), `o` opens a run's session; Esc goes back to the chat."""

    DEFAULT_CSS = """
    SchedulesScreen #schedules-body { height: 1fr; }
    SchedulesScreen #schedule-table { width: 2fr; height: 1fr; }
    SchedulesScreen #schedule-pane { width: 1fr; height: 1fr; border-left: solid $panel; }
    SchedulesScreen #schedule-meta { height: auto; padding: 0 1; }
    SchedulesScreen #schedule-runs { height: auto; padding: 0 1; }
    SchedulesScreen #schedule-output { height: auto; padding: 0 1; color: $text-muted; }
    """

    BINDINGS: ClassVar[list[Any]] = [
        Binding("a", "add", "Add", id="schedules.add"),
        Binding("r", "run", "Run now", id="schedules.run"),  # and Enter on a row
        Binding("p", "pause_resume", "Pause/resume", id="schedules.pause"),
        Binding("d", "delete", "Delete", id="schedules.delete"),
        Binding("o", "open_run", "Open run", id="schedules.open"),
        Binding("escape", "back", "Back", id="schedules.back", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="schedules")
        self.schedules: list[Schedule] = []
        self.runs: list[SlotRun] = []  # the highlighted schedule's slots, newest first
        self._generation = 0
        self._pane = 0
        self._resumed = False
        self._title = Static("Schedules", classes="section-title")
        # At 80 cells a long name or status gives way, then the agent and the `when` are
        # left out (the pane shows both): the next run, last status and streak stay in view.
        self._table = FitTable(
            id="schedule-table", shrink={"name": 10, "last": 8}, drop=("agent", "when")
        )
        self._meta = Static("", id="schedule-meta")
        self._runs = Static("", id="schedule-runs")
        self._output = Static("", id="schedule-output")
        self._empty = Static("", classes="empty")

    @property
    def service(self) -> SchedulesAccess:
        """The schedules, through the app's host."""
        schedules: SchedulesAccess = self.runtime.schedules
        return schedules

    @property
    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.runtime.config.timezone)
        except (KeyError, ValueError):
            return ZoneInfo("UTC")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._empty  # at the top, where no toast covers it
        with Horizontal(id="schedules-body"):
            yield self._table
            with VerticalScroll(id="schedule-pane"), Vertical():
                yield self._meta
                yield self._runs
                yield self._output
        yield KeyFooter()

    def on_mount(self) -> None:
        self._empty.display = False
        self._table.fill(COLUMNS, [])
        self._table.focus()

    def runtime_ready(self) -> None:
        self.reload()

    def on_screen_resume(self) -> None:
        # Runs, the CLI and the tools change schedules: read again when the screen returns.
        if self._resumed and self._loaded and self.has_runtime:
            self.reload()
        self._resumed = True

    async def call(self, what: Callable[[], Awaitable[T]]) -> T | None:
        """Run one schedules call; a refusal is a notice and None."""
        try:
            return await what()
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return None

    # -- the list ------------------------------------------------------------------------

    def next_times(self, schedule: Schedule) -> list[dt.datetime]:
        """The schedule's next three fire times (none while paused or spent)."""
        return [t.astimezone(self.zone) for t in self.service.upcoming(schedule)]

    def next_cell(self, schedule: Schedule) -> Text:
        """Paused, done, or when it runs next (the pane shows the next three)."""
        if not schedule.enabled:
            return Text("paused", style="yellow")
        if schedule.next_run is None:
            return Text("done", style="dim")
        return Text(fire_times_text([dt.datetime.fromtimestamp(schedule.next_run, self.zone)]))

    def reload(self, keep: str | None = None) -> None:
        """Read the list again, the cursor on `keep` (default: the highlighted schedule)."""
        self._generation += 1
        self._load(self._generation, keep or self.selected_id())

    @work(group="schedules-list")
    async def _load(self, generation: int, keep: str | None) -> None:
        if not self.has_runtime:
            return
        service = self.service
        found = await self.call(service.list_schedules)
        if generation != self._generation:
            return
        schedules = found or []
        self.schedules = list(schedules)
        failing = sum(s.fail_streak > 0 for s in schedules)
        paused = sum(not s.enabled for s in schedules)
        count = counted(len(schedules), "schedule")
        extra = (f" · {paused} paused" if paused else "") + (
            f" · {failing} failing" if failing else ""
        )
        self._title.update(Content(f"Schedules · {count}{extra}"))
        table = self._table
        # The first screenful paints at once (DataTable measures every new row before
        # its next frame: 1,000 rows held that frame up by a third of a second); the rest
        # join after it.
        table.fill(COLUMNS, self._rows(schedules[:FIRST_PAGE]))
        ids = [s.id for s in schedules]
        if keep in ids[:FIRST_PAGE] or (schedules and keep not in ids):
            table.move_cursor(row=ids.index(keep) if keep in ids else 0)
        self._empty.update(
            Content(
                ""
                if schedules
                else "No schedules yet. a adds one; agents add them with schedule_create; "
                "`habakkuk schedules add` adds prompts and scripts."
            )
        )
        self._empty.display = not schedules
        if not schedules:
            self._show(None, [])
        self.refresh_bindings()
        if len(schedules) > FIRST_PAGE:
            await self._next_frame()
            if generation != self._generation:
                return
            table.extend(self._rows(schedules[FIRST_PAGE:]))
            if keep in ids[FIRST_PAGE:]:
                table.move_cursor(row=ids.index(keep))

    def _rows(self, schedules: list[Schedule]) -> list[Row]:
        return [
            (
                schedule.id,
                [
                    Text(schedule.name),
                    Text(schedule.spec),
                    self.next_cell(schedule),
                    status_cell(schedule),
                    streak_cell(schedule),
                    Text(schedule.agent),
                ],
            )
            for schedule in schedules
        ]

    async def _next_frame(self) -> None:
        """Wait until the screen has painted what is there now."""
        painted = asyncio.Event()
        self.call_after_refresh(painted.set)
        await painted.wait()

    def selected(self) -> Schedule | None:
        """The highlighted schedule."""
        row = self._table.cursor_row
        if 0 <= row < len(self.schedules):
            return self.schedules[row]
        return None

    def selected_id(self) -> str | None:
        schedule = self.selected()
        return schedule.id if schedule is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table is self._table:
            schedule = self.selected()
            if schedule is not None:
                self._read(schedule.id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table is self._table:
            self.action_run()

    # -- the pane ------------------------------------------------------------------------

    @work(group="schedules-pane")
    async def _read(self, schedule_id: str) -> None:
        self._pane += 1
        pane, service = self._pane, self.service
        runs = await self.call(lambda: service.runs(schedule_id, limit=RUNS_SHOWN))
        schedule = self.selected()
        current = pane == self._pane and schedule is not None and schedule.id == schedule_id
        if runs is not None and current:
            self._show(schedule, runs)

    def _show(self, schedule: Schedule | None, runs: list[SlotRun]) -> None:
        self.runs = runs
        if schedule is None:
            for part in (self._meta, self._runs, self._output):
                part.update("")
            self.refresh_bindings()
            return
        lines = [
            f"{schedule.name} · {schedule.agent} · {schedule.kind} · {schedule.id}",
            f"when: {schedule.spec}",
            "next: "
            + (fire_times_text(self.next_times(schedule)) if schedule.enabled else "paused"),
            f"delivers to: {schedule.deliver_to or 'the run session'}",
        ]
        if schedule.kind == "script":
            lines.append(f"script: {schedule.command} · output: {schedule.on_output}")
        else:
            lines.append(f"prompt: {schedule.prompt}")
        if schedule.fail_streak:
            lines.append(f"failed {schedule.fail_streak} time(s) in a row")
        self._meta.update(Content("\n".join(lines)))
        shown = Text("Slots (newest first)\n", style="bold")
        zone = self.zone
        for run in runs:
            shown.append_text(run_line(run, zone))
            shown.append("\n")
        if not runs:
            shown.append("none yet", style="dim")
        self._runs.update(shown)
        output = schedule.last_output[-OUTPUT_SHOWN:]
        self._output.update(Content(f"last output:\n{output}" if output else ""))
        self.refresh_bindings()

    # -- keys ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("run", "pause_resume", "delete"):
            return self.selected() is not None
        if action == "open_run":
            return any(run.session for run in self.runs)
        return True

    def palette_commands(self) -> Iterable[SystemCommand]:
        """The screen's actions for the command palette, `Schedules: ...`."""
        for title, about, action in PALETTE:
            yield SystemCommand(title, about, getattr(self, f"action_{action}"))

    def action_back(self) -> None:
        self.happ.action_go("chat")

    def action_add(self) -> None:
        """The add form; the new schedule's next fire times in a notice."""
        if not self.has_runtime:
            return
        service = self.service

        def preview(when: str) -> list[dt.datetime]:
            return service.preview(when, count=3)

        def done(new: NewSchedule | None) -> None:
            if new is not None:
                self._add(new)

        agent = self.runtime.config.agent(None).name
        self.app.push_screen(ScheduleForm(agent, preview), done)

    @work(group="schedules-edit")
    async def _add(self, new: NewSchedule) -> None:
        service = self.service
        added = await self.call(lambda: service.add(new, by="owner"))
        if added is not None:
            self.notify(
                f"Added {added.name} ({added.id}); next: {fire_times_text(self.next_times(added))}",
                markup=False,
            )
            self.reload(keep=added.id)

    def action_run(self) -> None:
        """Queue one extra run of the highlighted schedule now."""
        schedule = self.selected()
        if schedule is not None:
            self._run(schedule.id, schedule.name)

    @work(group="schedules-edit")
    async def _run(self, schedule_id: str, name: str) -> None:
        service = self.service
        job = await self.call(lambda: service.run_now(schedule_id))
        if job is not None:
            self.notify(f"{name}: one extra run queued ({job}).", markup=False)
            self.reload(keep=schedule_id)

    def action_pause_resume(self) -> None:
        """Pause the highlighted schedule, or resume it from now."""
        schedule = self.selected()
        if schedule is not None:
            self._toggle(schedule.id, schedule.enabled)

    @work(group="schedules-edit")
    async def _toggle(self, schedule_id: str, enabled: bool) -> None:
        service = self.service
        if enabled:
            changed = await self.call(lambda: service.pause(schedule_id))
            word = "paused"
        else:
            changed = await self.call(lambda: service.resume(schedule_id))
            word = "resumed from now; missed slots are not replayed"
        if changed is not None:
            self.notify(f"{changed.name} {word}.", markup=False)
            self.reload(keep=schedule_id)

    def action_delete(self) -> None:
        """Delete the highlighted schedule after a yes."""
        schedule = self.selected()
        if schedule is None:
            return
        schedule_id, name = schedule.id, schedule.name

        def done(yes: bool | None) -> None:
            if yes:
                self._delete(schedule_id, name)

        self.app.push_screen(Confirm(f"Delete the schedule {name!r} ({schedule_id})?"), done)

    @work(group="schedules-edit")
    async def _delete(self, schedule_id: str, name: str) -> None:
        service = self.service

        async def delete() -> bool:
            await service.delete(schedule_id)
            return True

        if await self.call(delete):
            self.notify(f"Deleted {name}.", markup=False)
            self._show(None, [])
            self.reload()

    def action_open_run(self) -> None:
        """The newest run's session, in the chat."""
        for run in self.runs:
            if run.session:
                self.happ.open_session(run.session)
                return
