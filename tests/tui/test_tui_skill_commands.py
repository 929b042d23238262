"""/skills and /skill in the terminal app: the same command layer as every chat."""

from __future__ import annotations

from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import TextBlock
from tests.helpers import eventually
from tests.knowledge.skills.conftest import write_skill
from tests.tui.conftest import ChatApp, notices


async def test_skills_lists_and_skill_runs_a_turn_with_the_skill(
    chat_app: ChatApp, home: Home
) -> None:
    write_skill(home.root / "skills", "weekly-report", "Write the report.", body="1. Board.")
    async with chat_app("- 'echo: {input}'", size=(100, 40)) as ui:
        await ui.send("/skills")
        await eventually(
            lambda: any("weekly-report — Write the report." in n for n in notices(ui.app)),
            what="the /skills list",
        )
        await ui.send("/skill weekly-report this week")
        assert await ui.turn_finished() == "done"
        messages = await ui.runtime.sessions.messages(ui.chat.session_id)
        (text,) = [
            b.text
            for m in messages
            if m.message.role == "user"
            for b in m.message.blocks
            if isinstance(b, TextBlock)
        ]
        assert "1. Board." in text and text.endswith("Request: this week")
