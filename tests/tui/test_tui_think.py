"""/think in the chat: shows the effort, sets it for the session, shows it in the status line."""

from __future__ import annotations

from tests.conftest import WriteConfig, mock_config
from tests.tui.conftest import make_app, notices, ready, send, turn_finished, wait_until


async def test_think_sets_the_sessions_effort_and_the_status_line_shows_it(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await turn_finished(pilot)
        chat = app.get_chat()
        assert "think" not in chat._status.plain

        await send(pilot, "/think extreme")
        await wait_until(
            pilot, lambda: any("unknown level 'extreme'" in n for n in notices(app)), "error"
        )
        await send(pilot, "/think high")
        await wait_until(pilot, lambda: "Thinking: high for this session" in notices(app), "set")
        assert await app.runtime.session_thinking(chat.session_id) == ("high", True)
        assert "think high" in chat._status.plain

        await send(pilot, "/think")
        await wait_until(
            pilot,
            lambda: any(
                n.startswith("Thinking: high for this session (main") for n in notices(app)
            ),
            "shown",
        )
        await send(pilot, "/think default")
        await wait_until(
            pilot,
            lambda: any(n.startswith("Thinking: off (main's setting)") for n in notices(app)),
            "cleared",
        )
        assert "think" not in chat._status.plain


async def test_a_resumed_session_shows_its_own_think_level(write_config: WriteConfig) -> None:
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await turn_finished(pilot)
        chat = app.get_chat()
        first = chat.session_id
        await send(pilot, "/think low")
        await wait_until(pilot, lambda: "Thinking: low for this session" in notices(app), "set")
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: not chat.session_id, "a fresh session")
        assert "think" not in chat._status.plain
        await chat._open(first).wait()
        assert "think low" in chat._status.plain
