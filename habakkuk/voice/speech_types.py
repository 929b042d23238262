"""What a speech synthesizer is to its callers: text in, audio out (the providers are in
speech.py; this is the interface the talk loop and the voice replies use)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol


@dataclass(frozen=True)
class SpokenAudio:
    """Synthesized speech: the bytes, their media type and, when known, their length."""

    data: bytes
    mime: str  # "audio/ogg" | "audio/mpeg" | "audio/wav"
    duration_s: float | None


AudioFormat = Literal["ogg_opus", "wav"]


class SpeechSynthesizer(Protocol):
    """A `tts:` provider."""

    async def synthesize(
        self, text: str, voice: str | None = None, *, format: AudioFormat = "ogg_opus"
    ) -> SpokenAudio:
        """The text spoken in `voice` (the provider's default when None), as `format`."""
        ...
