"""/think in a chat: shows and sets the conversation session's reasoning effort."""

from __future__ import annotations

from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import OpenRuntime, start  # noqa: F401


async def test_think_in_a_chat_shows_sets_and_clears_the_sessions_effort(
    start: OpenRuntime,  # noqa: F811
    tg: FakeTelegram,
) -> None:
    runtime = await start('- text: "ok"')
    tg.message("/think")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    assert tg.texts()[0].startswith("Thinking: off (")
    tg.message("/think turbo")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    assert "unknown level 'turbo'" in tg.texts()[1]
    tg.message("/think high")
    await tg.wait_for(lambda: len(tg.texts()) == 3)
    assert tg.texts()[2].startswith("Thinking: high for this session")
    (session,) = await runtime.sessions.list_sessions()
    assert await runtime.settings.session_thinking(session.id) == ("high", True)
    tg.message("/think default")
    await tg.wait_for(lambda: len(tg.texts()) == 4)
    assert tg.texts()[3].startswith("Thinking: off (")
    assert await runtime.settings.session_thinking(session.id) == ("off", False)
    tg.message("/help")
    await tg.wait_for(lambda: len(tg.texts()) == 5)
    assert "/think" in tg.texts()[4]
