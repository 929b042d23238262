"""Sessions, approvals, overview and setup screens, and `--resume`, driven by keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.binding import Binding
from textual.widgets import DataTable, Input, Markdown, Select, Static

from habakkuk.app import HabakkukApp
from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home, read_env_file
from habakkuk.engine.nodes import NodeRegistry
from habakkuk.screens.overview import OverviewScreen
from habakkuk.screens.sessions import SessionsScreen
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.user_message import UserMessage
from habakkuk.work.board_types import NewCard
from habakkuk.work.schedule_types import TICK_LEASE
from tests.conftest import WriteConfig, mock_config
from tests.fakes.model_server import FakeModelServer
from tests.helpers import eventually
from tests.tui.conftest import chat_of, make_app, ready, running, runtime_of

EXEC_SCRIPT = """
- tool_calls:
    - name: exec
      arguments: {command: "echo from-approvals"}
- text: "done"
"""


async def add_session(app: HabakkukApp, session_id: str, title: str, words: str) -> None:
    """A stored session with one exchange, written through the facade."""
    runtime = runtime_of(app)
    await runtime.sessions.new_session(None, origin="test", session_id=session_id)
    await runtime.sessions.seed_session(
        session_id, [("user", words), ("assistant", f"answer about {words}")]
    )
    await runtime.sessions.rename_session(session_id, title)


def table_rows(table: DataTable[Any]) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_sessions_screen_lists_searches_and_opens_a_session(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config('- text: "continued"'))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await add_session(app, "ses_aaaa", "Garden plans", "tomatoes and basil")
        await add_session(app, "ses_bbbb", "Tax return", "receipts for 2025")
        await ui.press("ctrl+s")
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 2, what="two sessions listed")
        await ui.press("slash", *"tomatoes", "enter")
        await eventually(lambda: screen.row_sessions == ["ses_aaaa"], what="the search result")
        assert "[tomatoes]" in str(table_rows(table)[0])
        await ui.press("enter")
        await eventually(lambda: app.current_mode == "chat", what="the chat")
        chat = chat_of(app)
        await eventually(lambda: chat.session_id == "ses_aaaa", what="the session to open")
        await eventually(
            lambda: [u.text for u in app.screen.query(UserMessage)] == ["tomatoes and basil"],
            what="the stored messages",
        )
        assert "answer about tomatoes" in "".join(m.source for m in app.screen.query(Markdown))
        # Resume: the next message continues the same session.
        await ui.send("more")
        assert await ui.turn_finished() == "done"
        messages = await runtime_of(app).sessions.messages("ses_aaaa")
        assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]


async def test_ctrl_c_in_the_search_field_copies_its_selection(write_config: WriteConfig) -> None:
    from textual.widgets import Input

    write_config(mock_config())
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await ui.press("ctrl+s")
        await ui.press("slash", *"tomatoes")
        search = app.screen.query_one(Input)
        search.select_all()
        await ui.press("ctrl+c")
        assert app.clipboard == "tomatoes"
        assert search.value == "tomatoes" and not search.selected_text
        assert ui.toasts() == ["Copied 8 characters."]


async def test_sessions_screen_renames_archives_and_exports(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await add_session(app, "ses_cccc", "Old title", "something")
        await pilot.press("ctrl+s")
        screen = app.screen
        table = screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 1, what="the session listed")
        await pilot.press("r")
        await eventually(lambda: bool(app.screen.query("#answer")), what="the rename prompt")
        app.screen.query_one("#answer", Input).value = ""
        await pilot.press(*"New title", "enter")
        await eventually(lambda: "New title" in str(table_rows(table)), what="the renamed session")
        assert (await runtime_of(app).sessions.session("ses_cccc")).title == "New title"
        target = tmp_path / "out.html"
        await pilot.press("e")
        await eventually(lambda: bool(app.screen.query("#answer")), what="the export prompt")
        answer = app.screen.query_one("#answer", Input)
        # Offered: HOME/exports/, not the folder the app was started from.
        assert answer.value == str(runtime_of(app).home.root / "exports" / "ses_cccc.md")
        answer.value = str(tmp_path / "out.txt")
        await pilot.press("enter")
        # A bad extension is explained inline; the prompt stays.
        await eventually(
            lambda: "must end in" in str(app.screen.query_one(".error", Static).content),
            what="error",
        )
        answer.value = str(target)
        await pilot.press("enter")
        await eventually(target.exists, what="the export file")
        assert "<html" in target.read_text().lower()
        await pilot.press("x", "y")
        await eventually(lambda: table.row_count == 0, what="the archived session to go")
        assert (await runtime_of(app).sessions.session("ses_cccc")).archived


async def test_fork_from_the_sessions_screen_continues_in_the_copy(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config('- text: "in the fork"'))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await add_session(app, "ses_eeee", "Road trip", "route via the coast")
        await ui.press("ctrl+s")
        table = app.screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 1, what="the session listed")
        await ui.press("f")
        await eventually(lambda: app.current_mode == "chat", what="the chat")
        chat = chat_of(app)
        await eventually(lambda: chat.session_id not in ("", "ses_eeee"), what="the fork")
        fork = await runtime_of(app).sessions.session(chat.session_id)
        assert fork.forked_from == "ses_eeee" and fork.title == "Fork of Road trip"
        await eventually(
            lambda: [u.text for u in app.screen.query(UserMessage)] == ["route via the coast"],
            what="the copied messages",
        )
        # The conversation goes on in the fork; the original stays as it was.
        await ui.send("and then?")
        assert await ui.turn_finished() == "done"
        assert len(await runtime_of(app).sessions.messages(fork.id)) == 4
        assert len(await runtime_of(app).sessions.messages("ses_eeee")) == 2


async def test_resume_opens_the_session_picker_first(write_config: WriteConfig) -> None:
    write_config(mock_config())
    first = make_app(None)
    async with first.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await add_session(first, "ses_dddd", "Earlier chat", "hello again")
    app = make_app(None, resume=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await eventually(lambda: app.current_mode == "sessions", what="the picker")
        table = app.screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 1, what="the session listed")
        await pilot.press("enter")
        await eventually(
            lambda: app.current_mode == "chat" and chat_of(app).session_id == "ses_dddd",
            what="the chat on the session",
        )


async def test_approvals_screen_answers_the_highlighted_request(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(EXEC_SCRIPT, mode="ask"))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await ui.send("go")
        prompt = app.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval")
        await ui.press("ctrl+r")
        screen = app.screen
        table = screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 1, what="the waiting request listed")
        assert "echo from-approvals" in str(table_rows(table)[0])
        await ui.press("y")
        await eventually(lambda: table.row_count == 0, what="the request answered")
        await ui.press("ctrl+t")
        assert await ui.turn_finished() == "done"
        assert prompt.current is None


async def test_overview_shows_queue_depth_and_failures(write_config: WriteConfig) -> None:
    write_config(mock_config("- {error: auth}"))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        # A job of a kind no pool here runs stays queued: the overview must count it.
        await runtime_of(app).queue.enqueue("job_waiting", "report", {}, serial_key="x")
        await runtime_of(app).board.create(NewCard("Agree the scope"), by="user")  # unassigned
        await ui.send("fail please")
        assert await ui.turn_finished() == "failed"
        await ui.press("ctrl+o")
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        await eventually(lambda: screen.queued == 1, what="the queued job counted")
        summary = str(screen.query_one("#queue-summary", Static).content)
        assert "1 queued" in summary and "report" in summary
        assert "1 open card(s) on the board" in summary
        errors = screen.query_one("#errors", DataTable)
        await eventually(
            lambda: "model call failed" in str(table_rows(errors)), what="the failed turn"
        )


async def test_overview_lists_every_node_with_its_agents_leases_and_heartbeat(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        runtime = runtime_of(app)
        # Another --serve on another machine, hosting one agent.
        other = NodeRegistry(runtime.queue.db, agents=["main"], host="beta", pid=31337)
        await other.join()
        await pilot.press("ctrl+o")
        screen = app.screen
        table = screen.query_one("#nodes", DataTable)

        async def both_shown() -> bool:
            await pilot.press("r")
            rows = {row[0]: row for row in table_rows(table)}
            # This process (the app) runs the scheduler's ticker: it holds its lease.
            return len(rows) == 2 and TICK_LEASE in rows.get(runtime.nodes.host, [""] * 4)[3]

        await eventually(both_shown, what="both nodes, with the ticker's lease here")
        assert table.display
        rows = {row[0]: row for row in table_rows(table)}
        here = rows[runtime.nodes.host]
        assert here[1].endswith("(here)") and here[2] == "all"
        assert rows["beta"][1:4] == ["31337", "main", "-"]
        assert rows["beta"][4].endswith("s ago")


async def test_overview_lists_scheduled_jobs_with_when_and_why(write_config: WriteConfig) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+o")
        screen = app.screen
        scheduled = screen.query_one("#scheduled", DataTable)
        await eventually(
            lambda: "nothing scheduled" in str(table_rows(scheduled)), what="the empty table"
        )
        queue = runtime_of(app).queue
        await queue.enqueue("digest_tomorrow", "report", {}, delay=2 * 3600)
        await queue.enqueue("retry_me", "report", {}, max_attempts=4)
        lease = await queue.claim(["report"])
        assert lease is not None and lease.job.id == "retry_me"
        await queue.fail(lease, "upstream said\n503")
        await pilot.press("r")
        await eventually(
            lambda: "digest_tomorrow" in str(table_rows(scheduled)), what="the timed job"
        )
        rows = {row[2]: row for row in table_rows(scheduled)}
        assert rows["digest_tomorrow"][0] == "in 2.0h"
        assert rows["digest_tomorrow"][3] == "timed"
        assert rows["retry_me"][3] == "retry 2 of 4: upstream said 503"


async def test_setup_screen_explains_bad_entries_and_writes_a_valid_config(
    home: Home, models: FakeModelServer
) -> None:
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await pilot.press("ctrl+s")
        provider_error = app.screen.query_one("#provider-error", Static)
        await eventually(lambda: provider_error.display, what="the provider error")
        assert "Choose a provider" in str(provider_error.content)
        app.screen.query_one("#provider", Select).value = "openai"
        await pilot.pause()
        await pilot.press("ctrl+s")
        key_error = app.screen.query_one("#key-error", Static)
        await eventually(lambda: "needs an API key" in str(key_error.content), what="key")
        assert "Name the model" in str(app.screen.query_one("#model-error", Static).content)
        app.screen.query_one("#key", Input).focus()
        await pilot.press(*"sk-test-123")
        app.screen.query_one("#model", Input).focus()
        await pilot.press(*"gpt-5-mini")
        await pilot.press("ctrl+s")
        await eventually(lambda: home.config_path.exists(), what="the config file")
        config = load_config(home)
        assert [str(r) for r in config.agent(None).chain] == ["openai/gpt-5-mini"]
        assert read_env_file(home.env_path) == {"OPENAI_API_KEY": "sk-test-123"}
        assert "sk-test-123" not in home.config_path.read_text()
        assert oct(home.env_path.stat().st_mode & 0o777) == "0o600"
        assert [r.api_key for r in models.requests] == ["sk-test-123"]  # checked first
        await eventually(lambda: app.runtime is not None, what="the runtime to open")


async def test_setup_screen_offline_demo_writes_the_starter_config_and_chats(
    home: Home,
) -> None:
    app = make_app(home)
    async with running(app, wait_ready=False) as ui:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await ui.press("ctrl+o")
        await ready(ui.pilot)
        assert "type: mock" in home.config_path.read_text()
        await ui.send("hello demo")
        assert await ui.turn_finished() == "done"
        text = "".join(m.source for m in app.screen.query(Markdown))
        assert "Offline demo" in text and "hello demo" in text


async def test_a_broken_config_ends_with_a_one_line_error(
    write_config: WriteConfig,
) -> None:
    write_config("agents:\n  main:\n    model: nowhere/x\n")
    app = make_app(None)
    async with app.run_test(size=(80, 24)):
        await eventually(lambda: app.startup_error is not None, what="the error")
    assert app.startup_error is not None
    assert "provider 'nowhere' is not defined" in app.startup_error
    assert "\n" not in app.startup_error
    assert app.return_code == 2


@pytest.mark.parametrize("mode", ["sessions", "approvals", "overview", "memory", "chat"])
async def test_every_section_has_a_key_and_a_palette_entry(
    write_config: WriteConfig, mode: str
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        keys = {b.action: b.key for b in app.BINDINGS if isinstance(b, Binding)}
        await pilot.press(keys[f"go('{mode}')"])
        await eventually(lambda: app.current_mode == mode, what=f"the {mode} screen")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert f"Go: {mode}" in titles
        assert all(": " in title for title in titles)


@pytest.mark.parametrize(
    ("answer", "light"),
    [
        (b"\x1b]11;rgb:ffff/ffff/ffff\x07", True),
        (b"\x1b]11;rgb:1e1e/1e1e/1e1e\x1b\\", False),
        (b"\x1b]11;rgb:fd/f6/e3\x07", True),  # solarized light, two hex digits
        (b"", None),
        (b"garbage", None),
    ],
)
def test_osc11_background_answers_pick_the_theme(answer: bytes, light: bool | None) -> None:
    from habakkuk.app import parse_background

    assert parse_background(answer) is light


@pytest.mark.parametrize(("value", "light"), [("0;15", True), ("15;0", False), ("", None)])
def test_colorfgbg_is_the_fallback(value: str, light: bool | None) -> None:
    from habakkuk.app import colorfgbg_is_light

    assert colorfgbg_is_light(value) is light


async def test_the_configured_http_surface_runs_on_the_apps_loop(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(extra='http:\n  listen: "127.0.0.1:0"\n'))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await eventually(
            lambda: any("HTTP on http://127.0.0.1:" in t for t in ui.toasts()),
            what="the HTTP notice",
        )
        url = next(t.split()[2] for t in ui.toasts() if "HTTP on" in t)
        import aiohttp

        async with aiohttp.ClientSession() as client, client.get(f"{url}/app/") as response:
            assert response.status in (200, 401)
    # Quitting the app stopped the server with the runtime.
    async with aiohttp.ClientSession() as client:
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.get(f"{url}/app/")
