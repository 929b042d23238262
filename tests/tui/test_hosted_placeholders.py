"""A stored session's hosted web search and fetch show in the terminal as their one-line
placeholders, in place; the pause mark shows nothing."""

from __future__ import annotations

from habakkuk.engine.llm.hosted import pause_mark
from habakkuk.engine.llm.types import Message, OpaqueBlock, TextBlock
from habakkuk.engine.sessions import StoredMessage
from habakkuk.widgets.message_view import MessageView
from habakkuk.widgets.notice import Notice
from tests.helpers import eventually
from tests.tui.markdown_views import OneView, screen_lines


async def test_hosted_blocks_show_as_placeholders_between_the_words() -> None:
    search = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "q"}}
    messages = [
        Message("user", [TextBlock("look it up")]),
        Message("assistant", [OpaqueBlock("anthropic", search), pause_mark()]),
        Message("assistant", [TextBlock("Found it.")]),
    ]
    stored = [StoredMessage(i, m, "turn_1", 0.0, []) for i, m in enumerate(messages)]
    app = OneView()
    async with app.run_test(size=(60, 20)) as pilot:
        view = pilot.app.query_one(MessageView)
        await view.load("ses_1", stored)
        await eventually(lambda: "Found it." in "\n".join(screen_lines(pilot.app)), what="reply")
        notices = [w.text for w in view.children if isinstance(w, Notice)]
        assert notices == ["[web search: q]"]
