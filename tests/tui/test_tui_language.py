"""The terminal app speaks config.yaml's `language:`: its approval prompt, status line,
footer keys, screen titles, palette entries and tool cards in French."""

from __future__ import annotations

from textual.command import CommandList, CommandPalette
from textual.widgets import Static

from habakkuk.engine.i18n import current_language
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.footer import KeyFooter
from habakkuk.widgets.tool_card import ToolCard
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, status_text

EXEC_SCRIPT = """
- tool_calls:
    - name: exec
      arguments: {command: "echo bonjour"}
- text: "Fini."
"""


def header(card: ToolCard) -> str:
    """A tool card's header line as shown."""
    return str(card.query_one(".header").render())


def palette_titles(found: CommandList) -> list[str]:
    """The first lines of the palette's entries as listed now."""
    return [str(option.prompt).splitlines()[0] for option in found.options]


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


async def test_a_screens_title_and_the_palette_are_french(chat_app: ChatApp) -> None:
    """Text declared in English at import time (the palette's entries, a screen's title)
    is looked up when shown: in the app's language, not the one of the import."""
    async with chat_app(extra="language: fr\n", size=(120, 24)) as ui:
        await ui.press("ctrl+l")
        await eventually(lambda: ui.app.current_mode == "memory", what="the memory screen")
        screen = ui.screen
        title = screen.query_one(".section-title", Static)
        await eventually(
            lambda: str(title.render()) == "Mémoire · main · 0 note", what="the French title"
        )
        footer = screen.query_one(KeyFooter)
        await eventually(lambda: "Chercher" in footer_words(footer), what="a French footer key")
        # The palette as a person opens it (its entries are made in the app's context).
        await ui.press("ctrl+p")
        await eventually(lambda: isinstance(ui.app.screen, CommandPalette), what="the palette")
        await ui.press(*"oublier")
        found = ui.app.screen.query_one(CommandList)
        await eventually(
            lambda: "Mémoire: oublier la note" in palette_titles(found), what="a French entry"
        )
        assert not any(t.startswith(("Go:", "Memory:")) for t in palette_titles(found))
        for _ in "oublier":
            await ui.press("backspace")
        await ui.press(*"compacter")
        await eventually(
            lambda: "Session: compacter" in palette_titles(found), what="a chat command, French"
        )


async def test_a_tool_cards_status_is_french(chat_app: ChatApp) -> None:
    async with chat_app(EXEC_SCRIPT, mode="ask", extra="language: fr\n", size=(120, 24)) as ui:
        await ui.send("lance-le")
        await eventually(lambda: bool(ui.screen.query(ToolCard)), what="the tool card")
        card = ui.screen.query_one(ToolCard)
        await eventually(lambda: "attend une approbation" in header(card), what="the card waiting")
        assert "waiting for approval" not in header(card)
        await ui.press("y")
        assert await ui.turn_finished() == "done"
        await eventually(lambda: card.status == "ok", what="the call done")
        assert "attend une approbation" not in header(card)
