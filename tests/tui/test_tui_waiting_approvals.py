"""The approvals screen lists and answers approvals that wait in another process."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from textual.widgets import DataTable

from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import APPROVAL_SCRIPT, channel_yaml
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.tui.conftest import make_app, ready


def table_rows(table: DataTable[Any]) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_y_answers_a_chat_approval_waiting_in_another_process(
    runtime_factory: Any, home: Home, tg: FakeTelegram
) -> None:
    config = mock_config(APPROVAL_SCRIPT, mode="workspace", extra=channel_yaml(tg))
    serving: Runtime = await runtime_factory(config)  # a `--serve` holding the bot
    serving.start_workers()
    assert serving.channels is not None
    await serving.channels.started()
    tg.message("run the thing")
    # The turn runs in `serving` (claimed before the terminal's workers start).
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    [waiting] = await serving.approvals.waiting()
    terminal: Runtime = await runtime_factory(config)
    app = make_app(home, runtime=terminal)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+r")
        table = app.screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 1, what="the chat approval listed")
        [row] = table_rows(table)
        assert row[:3] == ["exec", "tg:42", "main"]
        assert "echo approved-run" in row[4]
        assert not terminal.approvals.pending  # not this process's own request
        await pilot.press("y")
        await eventually(lambda: table.row_count == 0, what="the approval answered")
    outcome = await asyncio.wait_for(serving.turns.wait_turn(waiting.turn), 30)
    assert outcome.status == "done"
    await tg.wait_for(lambda: "Approved from the terminal." in tg.texts())
    await tg.wait_for(lambda: "all done" in tg.texts())


async def test_the_screen_picks_up_an_approval_of_another_process_while_shown(
    runtime_factory: Any, home: Home, tg: FakeTelegram
) -> None:
    """Other processes publish nothing on this bus: the screen re-reads the list itself."""
    terminal: Runtime = await runtime_factory(mock_config(extra=channel_yaml(tg)))
    app = make_app(home, runtime=terminal)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+r")
        screen = app.screen
        table = screen.query_one(DataTable)
        await eventually(lambda: screen.is_current and table.row_count == 0, what="the screen")
        # What a turn of another process leaves in control.db while it waits.
        from habakkuk.channels.store import ChannelStore, Prompt

        store = await ChannelStore.open(terminal.queue.db)
        await terminal.queue.enqueue("turn_far", "turn", {}, serial_key="s")
        lease = await terminal.queue.claim(["turn"])  # running, as the other process has it
        assert lease is not None and lease.job.id == "turn_far"
        await store.open_prompt(
            Prompt(
                "apr_far",
                "approval",
                "tg:42",
                "turn_far",
                "nonce1",
                ["allow_once", "deny", "allow_session"],
                None,
                "",
                time.time(),
                tool="write_file",
                summary="notes.md",
                agent="main",
                session="ses_far",
            )
        )
        await eventually(lambda: table.row_count == 1, what="the periodic refresh")
        assert table_rows(table)[0][:3] == ["write_file", "tg:42", "main"]
        await pilot.press("n")
        await eventually(lambda: table.row_count == 0, what="the approval answered")
    assert await store.prompt_answer("apr_far") == ("deny", "terminal")


EXEC_SCRIPT = """
- tool_calls:
    - name: exec
      arguments: {command: "echo from-the-dashboard"}
- text: "done"
"""


@pytest.mark.parametrize("origin", ["web", "cli"])
async def test_a_web_or_terminal_approval_of_another_process_is_listed_and_answered(
    runtime_factory: Any, home: Home, origin: str
) -> None:
    """A `--serve` whose dashboard chat (or attached terminal) waits in its own hub: a
    second terminal on the home lists it as /api/approvals does, and answers it."""
    config = mock_config(EXEC_SCRIPT, mode="ask")
    serving: Runtime = await runtime_factory(config)
    serving.approvals.attach()  # what start_http does: the dashboard can answer
    serving.start_workers(channels=False)
    session = await serving.sessions.new_session(origin=origin)
    turn = await serving.turns.submit(session.id, "run it", attended=True)
    await eventually(
        lambda: serving.approvals.pending, what="the approval to wait in the serving process"
    )
    [request] = serving.approvals.pending
    terminal: Runtime = await runtime_factory(config)
    # The facade the screen and /api/approvals share sees it from the other process.
    [seen] = await terminal.approvals.waiting()
    assert (seen.id, seen.tool, seen.local) == (request.id, "exec", False)
    app = make_app(home, runtime=terminal)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+r")
        table = app.screen.query_one(DataTable)
        await eventually(lambda: table.row_count == 1, what="the approval listed")
        [row] = table_rows(table)
        assert row[:4] == ["exec", "web" if origin == "web" else "terminal", "main", session.id]
        assert "echo from-the-dashboard" in row[4]
        await pilot.press("y")
        await eventually(lambda: table.row_count == 0, what="the approval answered")
    outcome = await asyncio.wait_for(serving.turns.wait_turn(turn), 30)
    assert outcome.status == "done" and outcome.reply == "done"
    assert await terminal.approvals.waiting() == []
