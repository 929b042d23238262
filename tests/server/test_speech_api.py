"""GET /api/chat/{conversation}/messages/{seq}/speech with tts: (spec 001 "Chat"): one
of the agent's replies read aloud through the real aiohttp app, espeak-ng speaking for
real; a user's message is 404, a reply over tts.max_chars 413, and /api/app says
speech: true."""

from __future__ import annotations

from typing import Any

from habakkuk.voice import audio
from tests.conftest import mock_config
from tests.helpers import eventually

SCRIPT = "- '**Done.** The build passed.'"


async def replied(served: Any, conversation: str) -> tuple[int, int]:
    """Send a message to the web chat; (its seq, the reply's seq)."""
    await served.post_json("/api/chat", {"conversation": conversation, "text": "status?"})
    store = served.server.web_store()

    async def answered() -> bool:
        return any(e.role == "assistant" for e in await store.events(conversation))

    await eventually(answered, what="the reply in the web chat's log")
    events = await store.events(conversation)
    user = next(e.seq for e in events if e.role == "user")
    return user, next(e.seq for e in events if e.role == "assistant")


async def test_a_reply_is_read_aloud_and_a_users_message_is_not(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT, extra="tts:\n  provider: espeak\n"))
    assert (await served.get_json("/api/app"))["speech"] is True
    user, reply = await replied(served, "v1")
    url = f"{served.url}/api/chat/v1/messages/{reply}/speech"
    async with served.client.get(url, headers=served.auth()) as response:
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"] == "audio/ogg"
        body = await response.read()
    assert audio.is_ogg_opus(body) and (audio.ogg_duration(body) or 0) > 0.5
    for seq in (user, 999):
        url = f"{served.url}/api/chat/v1/messages/{seq}/speech"
        async with served.client.get(url, headers=served.auth()) as response:
            assert response.status == 404
            assert list(await response.json()) == ["error"]


async def test_a_reply_over_max_chars_is_413(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT, extra="tts:\n  provider: espeak\n  max_chars: 10\n"))
    _, reply = await replied(served, "v2")
    url = f"{served.url}/api/chat/v2/messages/{reply}/speech"
    async with served.client.get(url, headers=served.auth()) as response:
        assert response.status == 413
        assert "tts.max_chars is 10" in (await response.json())["error"]
