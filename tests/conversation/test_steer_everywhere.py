"""/steer and /btw in a chat and in the web chat (the terminal's: tests/tui/
test_steer_aside.py): /steer with nothing running is an ordinary message; /btw's answer
comes back as a reply to the same chat, through the delivery path, and the
conversation's transcript gains nothing from it."""

from __future__ import annotations

import textwrap

from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import channel_yaml
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.server.conftest import Served, ServeFactory

SCRIPT = "- 'echo: {input}'"


async def messages_of(served: Served, session: str) -> list[str]:
    return [m.message.text for m in await served.runtime.sessions.messages(session)]


async def test_steer_and_btw_in_a_telegram_chat(serve: ServeFactory, tg: FakeTelegram) -> None:
    served = await serve(mock_config(SCRIPT, extra=textwrap.dedent(channel_yaml(tg))))
    assert served.runtime.channels is not None
    await served.runtime.channels.started()
    tg.message("/steer use metric units")  # nothing runs: the chat's first message
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    assert tg.texts()[0].startswith("echo: use metric units")
    [session] = await served.runtime.sessions.list_sessions()
    before = await messages_of(served, session.id)
    tg.message("/btw which units?")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    answer = tg.texts()[1]
    assert "use metric units" in answer and "which units?" in answer  # seeded, then asked
    assert await messages_of(served, session.id) == before
    assert [s.id for s in await served.runtime.sessions.list_sessions()] == [session.id]


async def test_steer_and_btw_in_the_web_chat(serve: ServeFactory) -> None:
    served = await serve(mock_config(SCRIPT))
    store = served.server.web_store()

    async def reply_of(turn: str) -> str:
        await served.runtime.turns.wait_turn(turn)
        await eventually(lambda: store.find(f"reply:{turn}"), what=f"the reply to {turn}")
        found = await store.find(f"reply:{turn}")
        assert found is not None
        return str(found.text)

    steered = await served.post_json("/api/chat", {"conversation": "w", "text": "/steer go"})
    assert steered["turn"] and (await reply_of(steered["turn"])).startswith("echo: go")
    before = await messages_of(served, steered["session"])
    asked = await served.post_json("/api/chat", {"conversation": "w", "text": "/btw what?"})
    assert asked["turn"] and asked["session"] == steered["session"]  # the binding stays
    answer = await reply_of(asked["turn"])
    assert "user: go" in answer and "what?" in answer
    assert await messages_of(served, steered["session"]) == before
