"""The sessions screen keeps its place: rename, archive (asked first) and restore, search
hits named by title, Esc back to the chat."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from habakkuk.app import HabakkukApp
from habakkuk.screens.sessions import SessionsScreen
from habakkuk.screens.text_prompt import Confirm
from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.tui.conftest import make_app, ready, runtime_of
from tests.tui.test_tui_screens import add_session, table_rows

SESSIONS = [
    ("ses_aaaa", "Garden plans", "tomatoes and basil"),
    ("ses_bbbb", "Tax return", "receipts for 2025"),
    ("ses_cccc", "Road trip", "route via the coast"),
]


async def sessions_screen(
    app: HabakkukApp, pilot: Pilot[Any]
) -> tuple[SessionsScreen, DataTable[Any]]:
    await ready(pilot)
    for session_id, title, words in SESSIONS:
        await add_session(app, session_id, title, words)
    await pilot.press("ctrl+s")
    screen = app.screen
    assert isinstance(screen, SessionsScreen)
    table = screen.query_one(DataTable)
    await eventually(lambda: table.row_count == 3, what="three sessions listed")
    return screen, table


async def test_rename_prefills_the_title_and_keeps_the_cursor_on_the_session(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await sessions_screen(app, pilot)
        await pilot.press("down")
        target = screen.selected()
        assert target is not None and table.cursor_row == 1
        await pilot.press("r")
        await eventually(lambda: bool(app.screen.query("#answer")), what="the rename prompt")
        answer = app.screen.query_one("#answer", Input)
        assert answer.value == screen.row_titles[target]
        await pilot.press("end", *" (done)", "enter")
        await eventually(lambda: "(done)" in str(table_rows(table)), what="the renamed row listed")
        assert screen.selected() == target
        # The next action works on the same session, not on row 1.
        await pilot.press("r")
        await eventually(lambda: bool(app.screen.query("#answer")), what="the second prompt")
        assert app.screen.query_one("#answer", Input).value.endswith(" (done)")
        await pilot.press("escape")


async def test_archive_asks_and_the_archived_view_restores_it(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await sessions_screen(app, pilot)
        target = screen.selected()
        assert target is not None
        await pilot.press("x")
        await eventually(lambda: isinstance(app.screen, Confirm), what="the question")
        await pilot.press("n")
        await eventually(lambda: app.screen is screen, what="back on the list")
        assert not (await runtime_of(app).sessions.session(target)).archived
        assert table.row_count == 3
        await pilot.press("x")
        await eventually(lambda: isinstance(app.screen, Confirm), what="the question again")
        await pilot.press("y")
        await eventually(lambda: table.row_count == 2, what="the session archived")
        assert target not in screen.row_sessions
        assert (await runtime_of(app).sessions.session(target)).archived
        await pilot.press("v")
        await eventually(lambda: screen.row_sessions == [target], what="the archived view")
        await pilot.press("u")
        await eventually(lambda: screen.row_sessions == [], what="the session restored")
        assert not (await runtime_of(app).sessions.session(target)).archived
        await pilot.press("v")
        await eventually(lambda: table.row_count == 3, what="the recent list again")


async def test_search_hits_show_titles_and_esc_goes_back_to_the_chat(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await sessions_screen(app, pilot)
        await pilot.press("slash", *"receipts", "enter")
        await eventually(lambda: screen.row_sessions == ["ses_bbbb"], what="the hit")
        assert table_rows(table)[0][0] == "Tax return"
        # Esc leaves the search first, then the screen.
        await pilot.press("escape")
        await eventually(lambda: table.row_count == 3, what="the recent list")
        assert app.current_mode == "sessions"
        await pilot.press("escape")
        await eventually(lambda: app.current_mode == "chat", what="the chat")


async def test_board_and_sub_agent_sessions_are_left_out_until_a_shows_them(
    write_config: WriteConfig,
) -> None:
    from habakkuk.engine.sessions import BOARD_ORIGIN, DELEGATE_ORIGIN
    from tests.tui.test_tui_fit import footer_keys

    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        runtime = runtime_of(app)
        assert runtime is not None
        # As a card's run and a delegated task record theirs (work/card_runs, delegation).
        await runtime.sessions.new_session(None, origin=BOARD_ORIGIN, session_id="ses_card")
        await runtime.sessions.new_session(None, origin=DELEGATE_ORIGIN, session_id="ses_child")
        screen, table = await sessions_screen(app, pilot)
        assert isinstance(screen, SessionsScreen)
        await pilot.pause()
        assert sorted(screen.row_sessions) == ["ses_aaaa", "ses_bbbb", "ses_cccc"]
        assert "a: board cards' and sub-agents' too" in str(
            screen.query_one(".section-title").render()
        )
        assert ("a", "All") in [(key, about) for key, about, *_ in footer_keys(app)]
        await pilot.press("a")
        await eventually(lambda: table.row_count == 5, what="the work sessions listed too")
        rows = {row[3]: row for row in table_rows(table)}
        assert rows["ses_card"][4] == "board card" and rows["ses_child"][4] == "sub-agent"
        assert rows["ses_aaaa"][4] == ""
        await pilot.press("a")
        await eventually(lambda: table.row_count == 3, what="the user's sessions only again")
