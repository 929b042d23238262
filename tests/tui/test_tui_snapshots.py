"""SVG snapshots of every screen at 80x24 and 120x40 (stored under snapshots/tui/).

Volatile values are injected: sessions get fixed ids and times, approvals fixed
ids, and the app runs without cursor blink or animation. Update the SVGs with
`pytest tests/tui/test_tui_snapshots.py --snapshot-update` and review them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from textual.widgets import Static

from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from habakkuk.engine.toolkit.approvals import ApprovalRequest
from habakkuk.screens.approvals import ApprovalsScreen
from habakkuk.screens.overview import OverviewScreen
from habakkuk.screens.sessions import SessionsScreen
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.tui.conftest import chat_of, make_app, ready, runtime_of

SIZES = [(80, 24), (120, 40)]
FIXED_TIME = 1_790_000_000.0  # 2026-09-21 14:13 UTC


async def seed(app: Any) -> None:
    """Two sessions with fixed ids, titles, messages and times."""
    runtime = runtime_of(app)
    await runtime.sessions.new_session(None, origin="test", session_id="ses_0000000000000001")
    await runtime.sessions.seed_session(
        "ses_0000000000000001",
        [
            Message("user", [TextBlock("What is in the workspace?")]),
            Message(
                "assistant",
                [
                    ThinkingBlock("The user wants a listing; list_dir will do."),
                    TextBlock("Let me look."),
                    ToolUseBlock("call_1", "list_dir", {"path": "."}),
                ],
            ),
            Message("user", [ToolResultBlock("call_1", "notes.md\nplan.txt", False)]),
            Message(
                "assistant",
                [TextBlock("Two files:\n\n- **notes.md**\n- **plan.txt**\n\nWant me to open one?")],
            ),
        ],
    )
    await runtime.sessions.new_session(None, origin="test", session_id="ses_0000000000000002")
    await runtime.sessions.seed_session(
        "ses_0000000000000002", [Message("user", [TextBlock("Draft a note about [markup]")])]
    )
    # Fixed times so the snapshots do not change with the clock; the facade never sets
    # a session's times (they are when it happened), so this one stays raw SQL.
    await runtime.transcripts.db.write(
        lambda conn: conn.execute(
            "UPDATE sessions SET created_at = ?, updated_at = ? + (rowid * 60)",
            (FIXED_TIME, FIXED_TIME),
        )
    )


async def settle(pilot: Any) -> None:
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_chat_screen_with_history_and_an_approval(
    write_config: WriteConfig, svg_snapshot: SnapshotAssertion, size: tuple[int, int]
) -> None:
    write_config(mock_config(mode="ask"))
    app = make_app(None)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await seed(app)
        app.open_session("ses_0000000000000001")
        chat = chat_of(app)
        await eventually(lambda: chat.session_id == "ses_0000000000000001", what="session")
        request = ApprovalRequest(
            agent="main",
            session="ses_0000000000000001",
            turn="turn_0000000000000001",
            tool="exec",
            input={"command": "rm -r build/"},
            summary="rm -r build/",
            reason="deletes a folder the user did not mention",
            id="apr_000000000001",
        )
        waiting = asyncio.create_task(runtime_of(app).approvals.approve(request))
        prompt = app.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the prompt")
        await settle(pilot)
        assert svg_snapshot == app.export_screenshot()
        runtime_of(app).approvals.answer("apr_000000000001", "deny")
        await waiting


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_chat_screen_empty(
    write_config: WriteConfig, svg_snapshot: SnapshotAssertion, size: tuple[int, int]
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await settle(pilot)
        assert svg_snapshot == app.export_screenshot()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_chat_screen_with_the_slash_command_hint(
    write_config: WriteConfig, svg_snapshot: SnapshotAssertion, size: tuple[int, int]
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press("slash")
        hint = app.screen.query_one("#hint", Static)
        await eventually(lambda: hint.display, what="the completion hint")
        await settle(pilot)
        assert svg_snapshot == app.export_screenshot()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_sessions_screen(
    write_config: WriteConfig, svg_snapshot: SnapshotAssertion, size: tuple[int, int]
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await seed(app)
        await pilot.press("ctrl+s")
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        await eventually(lambda: len(sessions.row_sessions) == 2, what="the list")
        await settle(pilot)
        assert svg_snapshot == app.export_screenshot()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_approvals_screen(
    write_config: WriteConfig, svg_snapshot: SnapshotAssertion, size: tuple[int, int]
) -> None:
    write_config(mock_config(mode="ask"))
    app = make_app(None)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        request = ApprovalRequest(
            agent="main",
            session="ses_0000000000000003",
            turn="turn_0000000000000003",
            tool="write_file",
            input={"path": "/etc/hosts", "content": "..."},
            summary="/etc/hosts",
            id="apr_000000000002",
        )
        waiting = asyncio.create_task(runtime_of(app).approvals.approve(request))
        await pilot.press("ctrl+r")
        approvals = app.screen
        assert isinstance(approvals, ApprovalsScreen)
        await eventually(lambda: len(approvals.rows) == 1, what="the request")
        await settle(pilot)
        assert svg_snapshot == app.export_screenshot()
        runtime_of(app).approvals.answer("apr_000000000002", "deny")
        await waiting


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_overview_screen(
    write_config: WriteConfig, svg_snapshot: SnapshotAssertion, size: tuple[int, int]
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await runtime_of(app).queue.enqueue("job_0000000000000001", "report", {}, serial_key="r")
        await pilot.press("ctrl+o")
        overview = app.screen
        assert isinstance(overview, OverviewScreen)
        await eventually(lambda: overview.queued == 1, what="the queue")
        await settle(pilot)
        assert svg_snapshot == app.export_screenshot()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_setup_screen(
    home: Home, svg_snapshot: SnapshotAssertion, size: tuple[int, int]
) -> None:
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        await eventually(lambda: app.screen.id == "setup", what="the setup screen")
        await pilot.press("ctrl+s")
        await eventually(
            lambda: app.screen.query_one("#provider-error").display, what="the inline error"
        )
        await settle(pilot)
        assert svg_snapshot == app.export_screenshot()
