"""The chat's push-to-talk key: one message heard through the voice service, with notes
in the conversation saying what happens (listening, stopped, what went wrong)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from habakkuk.engine.errors import HabakkukError

if TYPE_CHECKING:
    from habakkuk.services.voice import VoiceAccess

Note = Callable[..., Awaitable[None]]  # MessageView.note(text, *, error=False)


async def hear_message(voice: VoiceAccess, stop: asyncio.Event, note: Note) -> str | None:
    """Listen until the speaker falls silent (or `stop`), then the text to send; None
    when nothing is to be sent (stopped, unheard, or an error, which is noted)."""

    async def listening() -> None:
        await note("Listening… speak, then pause (F4 again stops).")

    try:
        wav = await voice.listen(stop, listening)
        if wav is None:
            await note("Stopped listening.")
            return None
        text = (await voice.transcribe(wav)).strip()
    except HabakkukError as exc:
        await note(str(exc), error=True)
        return None
    return text or None
