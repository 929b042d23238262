"""Voice for the terminal's push-to-talk key: one utterance from the microphone (the
talk loop's capture and energy detector) and its text (the transcription endpoint).

Its Protocol, what the terminal uses of it, is `VoiceAccess` below: the chat screen
never opens a device or calls the transcription provider itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from habakkuk.engine.errors import HabakkukError

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Environment


class VoiceAccess(Protocol):
    """Hearing one message (habakkuk.services.voice.Voice)."""

    async def listen(
        self, stop: asyncio.Event, ready: Callable[[], Awaitable[None]] | None = None
    ) -> bytes | None:
        """One utterance as WAV, from the start of speech to the silence after it; None
        when `stop` is set first. `ready` is awaited once the microphone is open.
        HabakkukError (one line) when there is no microphone."""
        ...

    async def transcribe(self, wav: bytes) -> str:
        """The utterance's text; HabakkukError when the service is not configured, fails
        or heard nothing."""
        ...


class Voice:
    """The microphone and the transcription endpoint of this home's config."""

    def __init__(self, config: Config, env: Environment) -> None:
        self._config = config
        self._env = env

    async def listen(
        self, stop: asyncio.Event, ready: Callable[[], Awaitable[None]] | None = None
    ) -> bytes | None:
        """Capture until the detector hands over an utterance or `stop` is set."""
        from habakkuk.voice.audio_io import Microphone, load_sounddevice
        from habakkuk.voice.detector import DetectorSettings, EnergyDetector, Utterance
        from habakkuk.voice.wav import to_wav

        talk = self._config.talk
        loop = asyncio.get_running_loop()
        # PortAudio's start and the device's opening block for a moment: off the loop.
        sd = await asyncio.to_thread(load_sounddevice)
        microphone = Microphone(sd, talk.device)
        await asyncio.to_thread(microphone.open, loop)
        detector = EnergyDetector(
            DetectorSettings(threshold=talk.threshold, silence_s=talk.silence_seconds)
        )
        stopped = asyncio.ensure_future(stop.wait())
        try:
            if ready is not None:
                await ready()
            while True:
                frame = asyncio.ensure_future(microphone.frame())
                await asyncio.wait({frame, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not frame.done():
                    frame.cancel()
                    return None
                for event in detector.feed(frame.result()):
                    if isinstance(event, Utterance):
                        return to_wav(event.samples)
        finally:
            stopped.cancel()
            microphone.close()

    async def transcribe(self, wav: bytes) -> str:
        """The text, through the one transcription client."""
        from habakkuk.voice.transcription import TranscriptionError, transcribe

        settings = self._config.transcription
        if settings is None:
            raise HabakkukError("voice: transcription: is not configured in config.yaml")
        try:
            return await transcribe(settings, self._env, wav, "message.wav", "audio/wav")
        except TranscriptionError as exc:
            raise HabakkukError(f"voice: {exc}") from None
