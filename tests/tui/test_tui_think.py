"""/think in the chat: shows the effort, sets it for the session, shows it in the status line."""

from __future__ import annotations

from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.tui.conftest import chat_of, make_app, notices, running, runtime_of, status_text


async def test_think_sets_the_sessions_effort_and_the_status_line_shows_it(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await ui.send("hello")
        await ui.turn_finished()
        chat = chat_of(app)
        assert "think" not in status_text(app)

        await ui.send("/think extreme")
        await eventually(
            lambda: any("unknown level 'extreme'" in n for n in notices(app)), what="error"
        )
        await ui.send("/think high")
        await eventually(lambda: "Thinking: high for this session" in notices(app), what="set")
        assert await runtime_of(app).settings.session_thinking(chat.session_id) == ("high", True)
        assert "think high" in status_text(app)

        await ui.send("/think")
        await eventually(
            lambda: any(
                n.startswith("Thinking: high for this session (main") for n in notices(app)
            ),
            what="shown",
        )
        await ui.send("/think default")
        await eventually(
            lambda: any(n.startswith("Thinking: off (main's setting)") for n in notices(app)),
            what="cleared",
        )
        assert "think" not in status_text(app)


async def test_a_resumed_session_shows_its_own_think_level(write_config: WriteConfig) -> None:
    write_config(mock_config('- text: "reply"'))
    app = make_app(None)
    async with running(app, size=(80, 24)) as ui:
        await ui.send("hello")
        await ui.turn_finished()
        chat = chat_of(app)
        first = chat.session_id
        await ui.send("/think low")
        await eventually(lambda: "Thinking: low for this session" in notices(app), what="set")
        await ui.press("ctrl+n")
        await eventually(lambda: not chat.session_id, what="a fresh session")
        assert "think" not in status_text(app)
        await chat.open_session(first).wait()
        assert "think low" in status_text(app)
