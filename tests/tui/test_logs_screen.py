"""The Logs screen: reached from the palette's "Logs: show", it lists habakkuk.log's
records (read through the runtime's logs service), follows new ones, and filters by
level, age and words as `habakkuk logs` does; a bad field is said on the status line."""

from __future__ import annotations

import logging

from textual.widgets import Input, Static

from habakkuk.screens.logs import LogsScreen
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, Running


async def open_logs(ui: Running) -> LogsScreen:
    commands = {c.title: c for c in ui.app.get_system_commands(ui.screen)}
    commands["Logs: show"].callback()
    await eventually(lambda: ui.app.current_mode == "logs", what="the logs screen")
    screen = ui.screen
    assert isinstance(screen, LogsScreen)
    return screen


def messages(screen: LogsScreen) -> list[str]:
    return [r.message for r in screen.records if r.logger.startswith("test.logs")]


async def test_the_logs_screen_lists_follows_and_filters(chat_app: ChatApp) -> None:
    async with chat_app(size=(100, 30)) as ui:
        log = logging.getLogger("test.logs.screen")
        log.info("the queue drained")
        log.warning("telegram reconnecting")
        screen = await open_logs(ui)
        await eventually(
            lambda: messages(screen) == ["the queue drained", "telegram reconnecting"],
            what="the records written before it opened",
        )
        log.error("turn failed: provider said 500")
        await eventually(
            lambda: "turn failed: provider said 500" in messages(screen),
            what="a new record followed",
        )

        screen.query_one("#logs-level", Input).value = "warn"
        await eventually(
            lambda: messages(screen) == ["telegram reconnecting", "turn failed: provider said 500"],
            what="the level filter",
        )
        screen.query_one("#logs-grep", Input).value = "TELEGRAM"
        await eventually(
            lambda: messages(screen) == ["telegram reconnecting"], what="the words filter"
        )
        screen.query_one("#logs-since", Input).value = "1h"
        await ui.pilot.pause()
        await eventually(
            lambda: messages(screen) == ["telegram reconnecting"], what="the age filter"
        )

        screen.query_one("#logs-level", Input).value = "loud"
        status = screen.query_one("#logs-status", Static)
        await eventually(
            lambda: "level loud: use debug, info, warn or error" in str(status.content),
            what="the bad level said",
        )
        assert messages(screen) == ["telegram reconnecting"]  # the last good list stays

        await ui.press("escape")
        await eventually(lambda: ui.app.current_mode == "chat", what="back to the chat")
