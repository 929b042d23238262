"""The terminal's /steer key and /btw panel: while a turn runs, F2 (shown in the footer
only then) sends the composer's text as /steer, which the turn reads with its next tool
results; /btw's answer shows in a side panel Esc closes, and never in the conversation."""

from __future__ import annotations

from habakkuk.app import HabakkukApp
from habakkuk.engine.agent.guidance import is_guidance
from habakkuk.engine.home import Home
from habakkuk.widgets.aside_panel import AsidePanel
from habakkuk.widgets.composer import Composer
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, a_call_runs, notices

WAITS_FOR_GO = """
- text: "Waiting for the go file."
  tool_calls:
    - name: exec
      arguments: {command: "while [ ! -e GO ]; do sleep 0.05; done"}
- "Done waiting."
"""


def footer_keys(app: HabakkukApp) -> list[str]:
    """The descriptions of the keys the footer shows now."""
    from habakkuk.widgets.footer import KeyFooter

    return [str(getattr(k, "description", "")) for k in app.screen.query_one(KeyFooter).children]


async def test_the_steer_key_shows_while_a_turn_runs_and_steers_it(
    chat_app: ChatApp, home: Home
) -> None:
    async with chat_app(WAITS_FOR_GO, size=(100, 30)) as ui:
        assert "Steer" not in footer_keys(ui.app)  # nothing runs
        await ui.send("wait for it")
        await a_call_runs(ui.app)
        await eventually(lambda: "Steer" in footer_keys(ui.app), what="the steer key")
        composer = ui.screen.query_one(Composer)
        composer.insert("stop waiting soon")
        await ui.press("f2")
        await eventually(
            lambda: any(n.startswith("Guidance queued") for n in notices(ui.app)),
            what="the steer's answer",
        )
        assert composer.text == ""  # sent as /steer, not queued as a turn
        assert ui.chat.queued_turns == []
        (home.root / "agents" / "main" / "workspace" / "GO").touch()
        assert await ui.turn_finished() == "done"
        stored = await ui.runtime.sessions.messages(ui.chat.session_id)
        [carried] = [m for m in stored if any(is_guidance(b) for b in m.message.blocks)]
        assert carried.message.tool_results  # with the tool's results, for the next call
        await eventually(lambda: "Steer" not in footer_keys(ui.app), what="the key to go")


async def test_btw_answers_in_a_side_panel_esc_closes(chat_app: ChatApp) -> None:
    async with chat_app("- 'echo: {input}'", size=(100, 30)) as ui:
        await ui.send("remember the number 42")
        await ui.turn_finished()
        before = await ui.runtime.sessions.messages(ui.chat.session_id)
        await ui.send("/btw which number?")
        panel = ui.screen.query_one(AsidePanel)
        await eventually(lambda: panel.shown, what="the aside panel")
        assert panel.question == "which number?"
        assert "remember the number 42" in panel.answer  # seeded with the conversation
        assert await ui.runtime.sessions.messages(ui.chat.session_id) == before
        await ui.press("escape")
        await eventually(lambda: not panel.shown, what="the panel to close")


async def test_steer_with_nothing_running_is_an_ordinary_message(chat_app: ChatApp) -> None:
    async with chat_app("- 'echo: {input}'", size=(100, 30)) as ui:
        await ui.send("/steer use metric units")
        assert await ui.turn_finished() == "done"
        stored = await ui.runtime.sessions.messages(ui.chat.session_id)
        assert [m.message.role for m in stored] == ["user", "assistant"]
        assert stored[0].message.text.startswith("use metric units")
