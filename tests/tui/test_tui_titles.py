"""The terminal follows a session's background title: the chat's status line and the
sessions list show it once the title job has written it."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from habakkuk.screens.sessions import SessionsScreen
from habakkuk.widgets.status_line import StatusLine
from tests.conftest import WriteConfig
from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import eventually
from tests.tui.conftest import chat_of, make_app, ready, send
from tests.tui.test_tui_screens import table_rows

FIRST = "Can you help me plan three days in Lisbon?"


async def test_the_status_line_and_the_sessions_list_show_the_background_title(
    write_config: WriteConfig, model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    write_config(
        "providers:\n"
        f"  fake:\n    type: openai\n    base_url: {model_server.base_url}/v1\n"
        "    key_env: FAKE_KEY\n"
        "agents:\n  main:\n    model: fake/gpt-fake\n"
    )
    model_server.script(Reply("Happy to help."), Reply("Three Days in Lisbon"))
    app = make_app(None)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        chat = chat_of(app)
        await send(pilot, FIRST)

        status = chat.query_one(StatusLine)
        await eventually(
            lambda: status.status.session == "Three Days in Lisbon", what="the titled status"
        )
        await pilot.press("ctrl+s")
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 1, what="the session listed")
        assert "Three Days in Lisbon" in table_rows(table)[0]
