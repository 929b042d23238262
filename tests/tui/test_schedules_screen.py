"""The Schedules screen over a SchedulesAccess on a fixed clock (tests/fakes/schedules.py):
every schedule with its next three fire times, last status, streak and slots; add (the
form's fire times follow `when`), run now, pause and resume, delete after a yes, open a
run's session; the palette's entries; a snapshot on a deterministic home (UTC, the fake's
clock fixed at Tue 2026-12-01 07:00).
"""

from __future__ import annotations

from dataclasses import replace

from syrupy.assertion import SnapshotAssertion
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input, Static

from habakkuk.screens.schedule_form import ScheduleForm
from habakkuk.screens.schedules import SchedulesScreen
from habakkuk.screens.text_prompt import Confirm
from habakkuk.widgets.fit_table import FitTable
from habakkuk.work.schedule_types import NewSchedule, SchedulesAccess, SlotRun
from tests.fakes.schedules import NOW, FakeSchedules
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, Running, drawn

UTC = "timezone: UTC\n"


async def seed(ui: Running) -> FakeSchedules:
    """Three schedules: a weekday prompt with a weekend skipped while down, a failing
    script, a paused one."""
    fake = FakeSchedules()
    shown: SchedulesAccess = fake  # what the screens read it as, checked here
    # The runtime's own is a Schedules; the screens reach it only as a SchedulesAccess.
    ui.runtime.schedules = fake  # type: ignore[assignment]  # stands in for the screens only
    assert ui.runtime.schedules is shown
    inbox = await fake.add(
        NewSchedule("main", "inbox", "0 8 * * 1-5", "Summarise my inbox"), by="owner"
    )
    session = (await ui.runtime.sessions.new_session("main", origin="schedule")).id
    fake.put(
        replace(inbox, last_run=NOW - 86400, last_status="ok"),
        [
            SlotRun(inbox.id, NOW - 86400 - 3600, "ran", job="j1", session=session, delivered=True),
            SlotRun(inbox.id, NOW - 3 * 86400 - 3600, "skipped", reason="down"),
            SlotRun(inbox.id, NOW - 4 * 86400 - 3600, "skipped", reason="late"),
        ],
    )
    sync = await fake.add(
        NewSchedule("main", "ledger sync", "@every 2h", command="./sync.sh"), by="owner"
    )
    fake.put(replace(sync, last_status="error: exit 1", last_output="no network", fail_streak=3))
    quiet = await fake.add(NewSchedule("main", "weekly", "@weekly", "Plan"), by="owner")
    await fake.pause(quiet.id)
    return fake


async def open_schedules(ui: Running, count: int) -> SchedulesScreen:
    await ui.press("ctrl+b")
    await eventually(lambda: ui.app.current_mode == "schedules", what="the schedules screen")
    screen = ui.screen
    assert isinstance(screen, SchedulesScreen)
    await eventually(lambda: len(screen.schedules) == count, what=f"{count} schedules")
    await eventually(lambda: len(rows(screen)) == count, what=f"{count} rows")
    return screen


def rows(screen: SchedulesScreen) -> list[list[str]]:
    """The cells of the columns shown (FitTable.shown_labels), row by row."""
    table = screen.query_one("#schedule-table", DataTable)
    return [[str(cell) for cell in table.get_row_at(row)] for row in range(table.row_count)]


def column(screen: SchedulesScreen, label: str) -> list[str]:
    """One column's cells, wherever it is shown."""
    at = screen.query_one(FitTable).shown_labels.index(label)
    return [row[at] for row in rows(screen)]


def text_of(screen: SchedulesScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_each_schedule_shows_next_fire_times_last_status_streak_and_slots(
    chat_app: ChatApp,
) -> None:
    async with chat_app(extra=UTC) as ui:
        await seed(ui)
        screen = await open_schedules(ui, 3)
        shown = rows(screen)
        # At 80 columns: the next run, last status and streak; `when` and the agent are in
        # the pane (they are left out of the table rather than cut at its edge).
        assert screen.query_one(FitTable).shown_labels == ("name", "next", "last", "streak")
        assert shown[0] == ["inbox", "Tue 12-01 08:00", "ok", ""]
        assert shown[1] == ["ledger sync", "Tue 12-01 09:00", "error: exit 1", "3"]
        assert shown[2][0] == "weekly" and shown[2][1] == "paused"
        # ... and drawn whole, the streak inside the table's edge.
        lines = drawn(screen.query_one(FitTable))
        assert lines[0].split() == ["name", "next", "last", "streak"]
        assert lines[2].split() == [
            "ledger",
            "sync",
            "Tue",
            "12-01",
            "09:00",
            "error:",
            "exit",
            "1",
            "3",
        ]
        meta = text_of(screen, "#schedule-meta")
        assert "when: 0 8 * * 1-5" in meta and "inbox · main" in meta
        assert "next: Tue 12-01 08:00 · Wed 12-02 08:00 · Thu 12-03 08:00" in meta
        await eventually(lambda: "skipped: down" in text_of(screen, "#schedule-runs"), what="slots")
        runs = text_of(screen, "#schedule-runs")
        assert "ran, delivered" in runs and "skipped: late" in runs
        assert "Schedules · 3 schedules · 1 paused · 1 failing" in str(
            screen.query_one(".section-title", Static).render()
        )


async def test_the_form_shows_fire_times_as_when_is_typed_and_adds(chat_app: ChatApp) -> None:
    """On the real schedules service (control.db), its clock fixed."""
    async with chat_app(extra=UTC) as ui:
        service = ui.runtime.schedules
        service.clock = lambda: NOW
        screen = await open_schedules(ui, 0)
        await ui.press("a")
        await eventually(lambda: isinstance(ui.screen, ScheduleForm), what="the form")
        form = ui.screen
        fires = form.query_one("#form-fires", Static)
        form.query_one("#form-name", Input).value = "standup"
        form.query_one("#form-when", Input).value = "30m"
        await eventually(lambda: "did you mean '@every 30m'" in str(fires.render()), what="why")
        form.query_one("#form-when", Input).value = "0 9 * * *"
        await eventually(
            lambda: (
                "next: Tue 12-01 09:00 · Wed 12-02 09:00 · Thu 12-03 09:00" in str(fires.render())
            ),
            what="the fire times",
        )
        form.query_one("#form-deliver", Input).focus()
        await ui.press("enter")  # the prompt is still empty
        error = form.query_one("#form-error", Static)
        await eventually(lambda: "prompt: required" in str(error.render()), what="the refusal")
        form.query_one("#form-prompt", Input).value = "What is on today?"
        form.query_one("#form-deliver", Input).focus()
        await ui.press("enter")
        await eventually(lambda: len(screen.schedules) == 1, what="the new schedule listed")
        (added,) = await service.list_schedules()
        assert (added.name, added.prompt, added.command) == ("standup", "What is on today?", None)
        assert rows(screen)[0][:3] == ["standup", "0 9 * * *", "Tue 12-01 09:00"]
        await ui.press("r")
        await eventually(lambda: any(r.extra for r in screen.runs), what="the extra run listed")
        assert any("one extra run queued" in t for t in ui.toasts())


async def test_the_form_fits_80x24_with_every_field_and_its_hint_on_the_screen(
    chat_app: ChatApp, svg_snapshot: SnapshotAssertion
) -> None:
    async with chat_app(extra=UTC) as ui:
        ui.runtime.schedules.clock = lambda: NOW
        await open_schedules(ui, 0)
        await ui.press("a")
        await eventually(lambda: isinstance(ui.screen, ScheduleForm), what="the form")
        form = ui.screen
        form.query_one("#form-when", Input).value = "@every 2h"
        await eventually(lambda: "next:" in str(form.query_one("#form-fires").render()), what="")
        await ui.pilot.pause()
        screen = form.region
        assert screen.height == 24
        for widget in [*form.query(Input), form.query_one("#form-hint")]:
            assert widget.region.height >= 1 and screen.contains_region(widget.region), widget
        box = form.query_one(VerticalScroll)
        assert box.outer_size.height <= 24 and box.max_scroll_y == 0  # all of it, no scrolling
        assert svg_snapshot == ui.app.export_screenshot()


async def test_run_pause_resume_delete_and_open_a_run(chat_app: ChatApp) -> None:
    async with chat_app(extra=UTC) as ui:
        fake = await seed(ui)
        screen = await open_schedules(ui, 3)
        inbox = screen.schedules[0]
        await eventually(lambda: any(r.session for r in screen.runs), what="the slots")
        await ui.press("r")
        await eventually(lambda: len(fake.queued) == 1, what="one extra run")
        await ui.press("p")
        await eventually(lambda: not fake.items[inbox.id].enabled, what="paused")
        await eventually(
            lambda: (
                [r[0] for r in rows(screen)] == ["ledger sync", "inbox", "weekly"]
                and column(screen, "next")[1] == "paused"
            ),
            what="paused ones last",
        )
        await eventually(lambda: screen.selected_id() == inbox.id, what="the cursor kept")
        await ui.press("p")
        await eventually(lambda: fake.items[inbox.id].enabled, what="resumed")
        await eventually(lambda: screen.selected_id() == inbox.id, what="inbox kept")
        await eventually(lambda: any(r.session for r in screen.runs), what="its slots")
        session = next(r.session for r in screen.runs if r.session)
        await ui.press("o")
        await eventually(lambda: ui.app.current_mode == "chat", what="the chat")
        await eventually(lambda: ui.chat.session_id == session, what="the run's session")
        await ui.press("ctrl+b")
        await eventually(lambda: ui.app.current_mode == "schedules", what="back")
        await eventually(lambda: screen.selected_id() is not None, what="a row")
        doomed = screen.selected_id()
        await ui.press("d")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question")
        await ui.press("n")
        assert doomed in fake.items
        await ui.press("d")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question")
        await ui.press("y")
        await eventually(lambda: doomed not in fake.items, what="deleted")
        await eventually(lambda: len(screen.schedules) == 2, what="two left")


async def test_a_refusal_is_a_notice_and_the_palette_lists_the_actions(
    chat_app: ChatApp,
) -> None:
    async with chat_app(extra=UTC) as ui:
        fake = await seed(ui)
        screen = await open_schedules(ui, 3)
        del fake.items[screen.schedules[0].id]  # deleted elsewhere (the CLI, a tool)
        await ui.press("r")
        await eventually(lambda: any("does not exist" in t for t in ui.toasts()), what="notice")
        titles = [c.title for c in ui.app.get_system_commands(screen)]
        for title in ("Go: schedules", "Schedules: add schedule", "Schedules: run now",
                      "Schedules: pause or resume", "Schedules: delete schedule",
                      "Schedules: open run"):  # fmt: skip
            assert title in titles
        await ui.press("escape")
        await eventually(lambda: ui.app.current_mode == "chat", what="back to the chat")


async def test_schedules_screen_snapshot(
    chat_app: ChatApp, svg_snapshot: SnapshotAssertion
) -> None:
    """Three schedules on the fake's fixed clock in UTC (fire times never move).

    Update with `pytest tests/tui/test_schedules_screen.py -k snapshot --snapshot-update`.
    """
    async with chat_app(extra=UTC, size=(120, 30)) as ui:
        fake = await seed(ui)
        inbox = next(s for s in fake.items.values() if s.name == "inbox")
        fake.put(fake.items[inbox.id], [r for r in fake.slots[inbox.id] if not r.session])
        screen = await open_schedules(ui, 3)
        await eventually(lambda: "skipped: down" in text_of(screen, "#schedule-runs"), what="slots")
        await ui.pilot.pause()
        await ui.pilot.wait_for_scheduled_animations()
        await ui.pilot.pause()
        assert svg_snapshot == ui.app.export_screenshot()
