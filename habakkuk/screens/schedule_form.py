"""The Schedules screen's add form: a prompt schedule's agent, name, `when`, prompt and
where its replies go. The next fire times follow `when` as it is typed (through
SchedulesAccess.preview, which is pure), or the WhenError's one-line reason when it is not
understood. Scripts are added with `habakkuk schedules add --run` only, so the form has
no command field.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.i18n import t
from habakkuk.work.schedule_types import NewSchedule

Preview = Callable[[str], list[dt.datetime]]
FIELDS = ("agent", "name", "when", "prompt", "deliver")


def fire_times_text(times: list[dt.datetime]) -> str:
    """The next fire times as the form and the screen show them: `Tue 12-01 08:00`."""
    if not times:
        return t("tui.schedule_form.never")
    return " · ".join(at.strftime("%a %m-%d %H:%M") for at in times)


class ScheduleForm(ModalScreen[NewSchedule | None]):
    """Tab or Enter moves to the next field; Enter in the last one adds; Esc cancels.
    (ctrl+s is the app's Sessions key, so it cannot add here.)"""

    DEFAULT_CSS = """
    ScheduleForm { align: center middle; }
    ScheduleForm > VerticalScroll { width: 80; max-width: 95%; height: auto; max-height: 100%;
                                    padding: 0 1; border: round $primary; background: $surface; }
    ScheduleForm .label { color: $text-muted; height: auto; }
    ScheduleForm Input { margin: 0 1; background: $boost; }
    ScheduleForm #form-fires { height: auto; color: $text-success; }
    ScheduleForm #form-fires.bad { color: $text-error; }
    ScheduleForm #form-error { height: auto; color: $text-error; }
    """
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape", "cancel", "Cancel", id="schedule-form.cancel"),
    ]

    def __init__(self, agent: str, preview: Preview) -> None:
        super().__init__(id="schedule-form")
        self.agent = agent
        self.preview = preview
        self._fires = Static("", id="form-fires")
        self._error = Static("", id="form-error")

    def compose(self) -> ComposeResult:
        # One line per field (compact inputs), so the form fits 80x24; where it still
        # does not, it scrolls, the focused field in view.
        with VerticalScroll():
            yield Static(Content(t("tui.schedule_form.title")), classes="section-title")
            yield Static(t("tui.schedule_form.agent"), classes="label")
            yield Input(self.agent, id="form-agent", compact=True)
            yield Static(t("tui.schedule_form.name"), classes="label")
            yield Input(
                "", id="form-name", placeholder=t("tui.schedule_form.name_hint"), compact=True
            )
            yield Static(
                Content(t("tui.schedule_form.when")),
                classes="label",
            )
            yield Input("", id="form-when", placeholder="0 8 * * 1-5", compact=True)
            yield self._fires
            yield Static(t("tui.schedule_form.prompt"), classes="label")
            yield Input(
                "", id="form-prompt", placeholder=t("tui.schedule_form.prompt_hint"), compact=True
            )
            yield Static(
                Content(t("tui.schedule_form.deliver")),
                classes="label",
            )
            yield Input("", id="form-deliver", compact=True)
            yield self._error
            yield Static(t("tui.form.hint"), classes="label", id="form-hint")

    def on_mount(self) -> None:
        self.query_one("#form-name", Input).focus()

    def value(self, name: str) -> str:
        """One field's text, stripped."""
        return self.query_one(f"#form-{name}", Input).value.strip()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "form-when":
            self.show_fires(event.value.strip())

    def show_fires(self, when: str) -> None:
        """The next three fire times of `when`, or why it is not understood."""
        if not when:
            self._fires.update("")
            self._fires.remove_class("bad")
            return
        try:
            text = t("tui.schedule_form.next", times=fire_times_text(self.preview(when)))
            self._fires.remove_class("bad")
        except HabakkukError as exc:
            text = str(exc)
            self._fires.add_class("bad")
        self._fires.update(Content(text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "form-deliver":
            self.action_add()
        else:
            self.focus_next()

    def action_add(self) -> None:
        """Check the fields and hand the new schedule to the screen (which stores it)."""
        values = {name: self.value(name) for name in FIELDS}
        missing = [n for n in ("agent", "name", "when", "prompt") if not values[n]]
        if missing:
            self._error.update(Content(t("tui.schedule_form.required", fields=", ".join(missing))))
            return
        try:
            self.preview(values["when"])
        except HabakkukError as exc:
            self._error.update(Content(f"when: {exc}"))
            return
        self.dismiss(
            NewSchedule(
                agent=values["agent"],
                name=values["name"],
                when=values["when"],
                prompt=values["prompt"],
                deliver_to=values["deliver"] or None,
                origin="tui",
            )
        )

    def action_cancel(self) -> None:
        self.dismiss(None)
