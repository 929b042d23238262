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

import datetime as dt
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import ZoneInfo

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from habakkuk.engine.i18n import t
from habakkuk.screens.list_detail import ListDetailScreen, Listing, PaletteEntry
from habakkuk.screens.schedule_form import ScheduleForm, fire_times_text
from habakkuk.screens.text_prompt import Confirm
from habakkuk.widgets.fit_table import Cell
from habakkuk.work.schedule_views import slot_outcome

if TYPE_CHECKING:
    from habakkuk.work.schedule_types import NewSchedule, Schedule, SchedulesAccess, SlotRun

COLUMNS = ("name", "when", "next", "last", "streak", "agent")
RUNS_SHOWN = 20
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


class SchedulesScreen(ListDetailScreen["Schedule", "list[SlotRun]"]):
    """Every schedule of the home: `a` adds, Enter or `r` runs now, `p` pauses or resumes,
    `d` deletes (asks first), `o` opens a run's session; Esc goes back to the chat."""

    DEFAULT_CSS = """
    SchedulesScreen #schedule-table { width: 2fr; }
    SchedulesScreen #schedule-pane { width: 1fr; }
    SchedulesScreen #schedule-output { color: $text-muted; }
    """

    BINDINGS: ClassVar[list[Any]] = [
        Binding("a", "add", "Add", id="schedules.add"),
        Binding("r", "run", "Run now", id="schedules.run"),  # and Enter on a row
        Binding("p", "pause_resume", "Pause/resume", id="schedules.pause"),
        Binding("d", "delete", "Delete", id="schedules.delete"),
        Binding("o", "open_run", "Open run", id="schedules.open"),
        Binding("escape", "back", "Back", id="schedules.back", show=False),
    ]
    SECTION = "Schedules"
    PALETTE = (
        PaletteEntry("add", "add schedule", "A prompt on a timetable"),
        PaletteEntry("run", "run now", "Queue one extra run of the schedule", ("enter",)),
        PaletteEntry(
            "pause_resume", "pause or resume", "Pause the schedule, or resume it from now"
        ),
        PaletteEntry("delete", "delete schedule", "Delete the schedule"),
        PaletteEntry("open_run", "open run", "The newest run's session in the chat"),
    )
    ITEM = "schedule"
    COLUMNS = COLUMNS
    # At 80 cells a long name or status gives way, then the agent and the `when` are left
    # out (the pane shows both): the next run, last status and streak stay in view.
    SHRINK: ClassVar[dict[str, int]] = {"name": 10, "last": 8}
    DROP = ("agent", "when")
    ROW_ACTION = "run"
    FIRST_PAGE = 60  # more than a screenful

    def __init__(self) -> None:
        super().__init__(id="schedules", title="Schedules")
        self.runs: list[SlotRun] = []  # the highlighted schedule's slots, newest first
        self._meta = Static("", id="schedule-meta", classes="pane-line")
        self._runs = Static("", id="schedule-runs", classes="pane-line")
        self._output = Static("", id="schedule-output", classes="pane-line")

    @property
    def service(self) -> SchedulesAccess:
        """The schedules, through the app's host."""
        schedules: SchedulesAccess = self.runtime.schedules
        return schedules

    @property
    def schedules(self) -> list[Schedule]:
        """The listed schedules, in order."""
        return self.items

    @property
    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.runtime.config.timezone)
        except (KeyError, ValueError):
            return ZoneInfo("UTC")

    def compose_pane(self) -> ComposeResult:
        with VerticalScroll(id="schedule-pane", classes="list-pane"), Vertical():
            yield self._meta
            yield self._runs
            yield self._output

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

    async def listing(self) -> Listing[Schedule]:
        schedules = await self.call(self.service.list_schedules) or []
        failing = sum(s.fail_streak > 0 for s in schedules)
        paused = sum(not s.enabled for s in schedules)
        title = t("tui.title.schedules", schedules=t("tui.count.schedules", count=len(schedules)))
        if paused:
            title += " · " + t("tui.schedules.paused", count=paused)
        if failing:
            title += " · " + t("tui.schedules.failing", count=failing)
        return Listing(
            schedules,
            title,
            t("tui.empty.schedules"),
        )

    def key(self, item: Schedule) -> str:
        return item.id

    def cells(self, item: Schedule) -> list[Cell]:
        return [
            Text(item.name),
            Text(item.spec),
            self.next_cell(item),
            status_cell(item),
            streak_cell(item),
            Text(item.agent),
        ]

    # -- the pane ------------------------------------------------------------------------

    async def fetch_detail(self, item: Schedule) -> list[SlotRun]:
        return await self.service.runs(item.id, limit=RUNS_SHOWN)

    def show_detail(self, item: Schedule | None, detail: list[SlotRun] | None) -> None:
        self._show(item, detail or [])

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
                t(
                    "tui.schedules.added",
                    name=added.name,
                    id=added.id,
                    next=fire_times_text(self.next_times(added)),
                ),
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
            self.notify(t("tui.schedules.queued", name=name, job=job), markup=False)
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
            word = "tui.schedules.now_paused"
        else:
            changed = await self.call(lambda: service.resume(schedule_id))
            word = "tui.schedules.resumed"
        if changed is not None:
            self.notify(t(word, name=changed.name), markup=False)
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
            self.notify(t("tui.schedules.deleted", name=name), markup=False)
            self._show(None, [])
            self.reload()

    def action_open_run(self) -> None:
        """The newest run's session, in the chat."""
        for run in self.runs:
            if run.session:
                self.happ.open_session(run.session)
                return
