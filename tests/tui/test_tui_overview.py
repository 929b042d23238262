"""The overview as the control room: HTTP listener, channels, MCP servers, usage today and
recent errors, each error readable whole with Enter; a snapshot at 80x24."""

from __future__ import annotations

import os
import socket
from typing import Any

from syrupy.assertion import SnapshotAssertion
from textual.widgets import DataTable, Static

from habakkuk.channels.store import ChannelStore
from habakkuk.engine.config import ModelRef
from habakkuk.engine.home import Home
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Usage
from habakkuk.runtime import Runtime
from habakkuk.screens.text_prompt import ShowText
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import channel_yaml
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, make_app, ready

LONG_ERROR = (
    "upstream said 503 Service Unavailable while fetching the nightly digest; "
    + "the body was: "
    + "x" * 150
    + " END-OF-ERROR"
)
MCP = "mcp_servers:\n  files:\n    command: no-such-mcp-program-xyz\n"


def table_rows(table: DataTable[Any]) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def failed_job(runtime: Runtime, job_id: str, error: str) -> None:
    """A job of its own kind that failed for good with `error`."""
    queue = runtime.queue
    await queue.enqueue(job_id, "digest", {}, max_attempts=1)
    lease = await queue.claim(["digest"])
    assert lease is not None and lease.job.id == job_id
    await queue.fail(lease, error)


async def test_overview_shows_the_listener_channels_mcp_usage_and_errors_whole(
    runtime_factory: Any, home: Home, tg: FakeTelegram
) -> None:
    config = mock_config(extra=channel_yaml(tg) + 'http:\n  listen: "127.0.0.1:0"\n' + MCP)
    serving: Runtime = await runtime_factory(config)  # a `--serve` holding the listener
    server = await serving.http.start("127.0.0.1:0")
    terminal: Runtime = await runtime_factory(config)
    assert terminal.usage is not None
    await terminal.usage.record(
        ModelRef.parse("anthropic/claude-sonnet-4-5"),
        Caller(agent="main"),
        Usage(input_tokens=1200, output_tokens=300),
    )
    await failed_job(terminal, "job_digest", LONG_ERROR)
    app = make_app(home, runtime=terminal)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert terminal.channels is not None
        await terminal.channels.started()
        # This process's adapter stops first: live, it would record its own state over
        # the one written below (it restarts on a dropped poll, as on a loaded machine).
        await terminal.channels.supervisor.remove("tg")
        # What a channel that keeps failing records in another process, which holds it.
        store = ChannelStore(terminal.queue.db)
        assert await store.acquire_lease("channel:tg", "another:1:node", 600) is None
        await store.set_status("tg", "telegram", "fatal", detail="401 Unauthorized: bad token")
        await pilot.press("ctrl+o")
        screen = app.screen
        errors = screen.query_one("#errors", DataTable)

        def shown() -> str:
            return str(screen.query_one("#http-summary", Static).content)

        await eventually(lambda: "held by pid" in shown(), what="the listener's holder")
        assert server.url not in shown()  # another process serves it, not this one
        usage = str(screen.query_one("#usage-summary", Static).content)
        assert "today 1 call(s)" in usage and "1,200 in" in usage and "300 out" in usage
        assert "$0.0000" not in usage
        await eventually(
            lambda: {"job_digest", "tg", "files"} <= {row[1] for row in table_rows(errors)},
            what="the failed job, the channel and the MCP server listed as errors",
        )
        channels = table_rows(screen.query_one("#channels", DataTable))
        assert channels[0][:3] == ["tg", "telegram", "fatal"]
        assert channels[0][3].endswith(" ago") and channels[0][4:6] == ["never", "never"]
        [mcp] = table_rows(screen.query_one("#mcp", DataTable))
        assert mcp[:2] == ["files", "down"]
        # The row is cut to the screen; Enter shows the whole error.
        row = next(r for r in table_rows(errors) if r[1] == "job_digest")
        assert "END-OF-ERROR" not in row[2] and row[2].endswith("…")
        errors.focus()
        errors.move_cursor(row=[r[1] for r in table_rows(errors)].index("job_digest"))
        await pilot.press("enter")
        await eventually(lambda: isinstance(app.screen, ShowText), what="the whole error")
        assert str(app.screen.query_one("#full-text", Static).content) == LONG_ERROR
        await pilot.press("escape")
        await eventually(lambda: app.screen is screen, what="back on the overview")


async def test_overview_says_this_process_serves_http(runtime_factory: Any, home: Home) -> None:
    runtime: Runtime = await runtime_factory(mock_config())
    server = await runtime.http.start("127.0.0.1:0")
    view = await runtime.control.overview()
    assert view.http.state == "serving" and view.http.address == server.url
    assert view.http.holder.startswith("this process")
    await runtime.http.stop()
    assert (await runtime.control.overview()).http.state == "off"


async def test_overview_snapshot_at_80x24(
    runtime_factory: Any, home: Home, svg_snapshot: SnapshotAssertion
) -> None:
    # No nightly memory pass: a run of it caught by one refresh would widen the running
    # table's kind column (a DataTable keeps its widest cell), so the picture would
    # depend on timing.
    quiet = MCP + 'memory:\n  nightly: "off"\n'
    runtime: Runtime = await runtime_factory(mock_config(extra=quiet))
    await failed_job(runtime, "job_digest", LONG_ERROR)
    await failed_job(runtime, "job_backup", "disk full")
    app = make_app(home, runtime=runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+o")
        screen = app.screen
        errors = screen.query_one("#errors", DataTable)
        await eventually(
            lambda: {"job_digest", "job_backup", "files"} <= {r[1] for r in table_rows(errors)},
            what="the errors listed",
        )
        await pilot.pause()
        assert svg_snapshot == app.export_screenshot()


async def test_a_second_process_stands_by_and_names_the_holder(
    runtime_factory: Any, home: Home
) -> None:
    first: Runtime = await runtime_factory(mock_config())
    server = await first.http.start("127.0.0.1:0")
    listen = server.url.removeprefix("http://")
    second: Runtime = await runtime_factory(mock_config(extra=f'http:\n  listen: "{listen}"\n'))
    lines: list[str] = []
    await second.http.serve(lines.append, retry_seconds=3600)
    assert "standing by" in lines[-1]

    async def holder_recorded() -> str:
        return (await second.control.overview()).http.holder

    # The first process records its lease in a task of its own.
    await eventually(holder_recorded, what="the holder recorded")
    http = (await second.control.overview()).http
    assert (http.state, http.address) == ("stand-by", listen)
    assert http.holder == f"pid {os.getpid()} on {socket.gethostname()}"


async def test_a_providers_edit_shows_a_notice_and_the_overviews_config_row(
    chat_app: ChatApp, home: Home
) -> None:
    async with chat_app(size=(100, 30)) as ui:
        await ui.press("ctrl+o")
        row = ui.screen.query_one("#config-row")
        summary = ui.screen.query_one("#config-summary", Static)
        assert not row.display  # nothing changed yet
        text = home.config_path.read_text(encoding="utf-8")
        head, rest = text.split("agents:", 1)
        edited = head + "  spare:\n    type: mock\n" + "agents:" + rest
        home.config_path.write_text(edited, encoding="utf-8")
        await eventually(
            lambda: any("providers changed; restart" in t for t in ui.toasts()),
            what="the terminal's notice",
        )
        await eventually(
            lambda: "restart: providers" in str(summary.content), what="the config row"
        )
        assert row.display
        home.config_path.write_text(edited + "timezone: Mars/Olympus_Mons\n", encoding="utf-8")
        await eventually(
            lambda: any(f"{home.config_path}:" in t for t in ui.toasts()),
            what="the broken file's notice",
        )
        await eventually(lambda: "Olympus" in str(summary.content), what="the error shown")


async def test_overview_lists_the_running_goals_and_drops_a_cleared_one(
    runtime_factory: Any, home: Home
) -> None:
    runtime: Runtime = await runtime_factory(mock_config())
    session = await runtime.sessions.new_session(None, origin="cli")
    await runtime.goals.begin(session.id, "write the report", 10)
    app = make_app(home, runtime=runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+o")
        screen = app.screen

        def queue() -> str:
            return str(screen.query_one("#queue-summary", Static).content)

        line = f"{session.id}: 0/10 turns: write the report"
        await eventually(lambda: line in queue(), what="the running goal listed")
        assert "Goals" in queue()
        await runtime.goals.clear(session.id)  # its GoalChanged reloads the overview
        await eventually(lambda: line not in queue(), what="the cleared goal gone")
