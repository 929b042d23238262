"""The terminal app speaks config.yaml's `language:`: its approval prompt, status line
and footer keys in French."""

from __future__ import annotations

from habakkuk.engine.i18n import current_language
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.footer import KeyFooter
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, status_text

EXEC_SCRIPT = """
- tool_calls:
    - name: exec
      arguments: {command: "echo bonjour"}
- text: "Fini."
"""


def footer_words(footer: KeyFooter) -> list[str]:
    return [str(getattr(item, "description", "")) for item in footer.children]


async def test_the_approval_prompt_is_french_when_the_config_says_fr(
    chat_app: ChatApp,
) -> None:
    async with chat_app(EXEC_SCRIPT, mode="ask", extra="language: fr\n", size=(120, 24)) as ui:
        await ui.send("lance-le")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        shown = str(prompt.render())
        assert "Approuver exec ?" in shown
        assert "y autoriser une fois · a autoriser pour cette session" in shown
        assert "Approve" not in shown
        footer = ui.screen.query_one(KeyFooter)
        await eventually(
            lambda: "Autoriser une fois" in footer_words(footer), what="the footer's French keys"
        )
        await ui.press("y")
        assert await ui.turn_finished() == "done"
        await eventually(lambda: "inactif" in status_text(ui.app), what="the idle status")
    # The app's language stayed in the app: the test (its caller) still speaks English.
    assert current_language() == "en"


async def test_without_a_language_the_app_speaks_english(chat_app: ChatApp) -> None:
    async with chat_app(EXEC_SCRIPT, mode="ask", size=(120, 24)) as ui:
        await ui.send("run it")
        prompt = ui.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        assert "Approve exec?" in str(prompt.render())
        await ui.press("y")
        assert await ui.turn_finished() == "done"
