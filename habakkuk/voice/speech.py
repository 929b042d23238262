"""Text to speech with the `tts:` provider: the one interface every speaker uses.

`build_synthesizer(config.tts, secrets)` gives a SpeechSynthesizer: `synthesize(text,
voice, format=)` returns SpokenAudio, the bytes, their MIME type and how long they play.
`format="ogg_opus"` is a voice note: OpenAI and ElevenLabs are asked for Opus, anything
else (edge's MP3, espeak's WAV) is converted with ffmpeg when it is installed, else it
goes as the provider made it (the MIME type says what). `format="wav"` is 16-bit PCM WAV
for the local loop to play; without ffmpeg a provider that cannot make WAV is a
SpeechError saying so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

from . import audio
from .audio import SpeechError
from .providers import ElevenLabsSpeech, OpenAISpeech, Secrets
from .speech_types import AudioFormat, SpeechSynthesizer, SpokenAudio

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.tts_config import TtsConfig

__all__ = [
    "AudioFormat",
    "Secrets",
    "SpeechError",
    "SpeechSynthesizer",
    "SpokenAudio",
    "build_synthesizer",
    "suffix_of",
    "synthesizer_for",
]


# What a voice may be called (provider names, ElevenLabs ids, espeak-ng's en-us+f3): never
# an option of a command, never markup.
VOICE_NAME = re.compile(r"[A-Za-z0-9_.+()][A-Za-z0-9_.,+ ()-]{0,119}")


class Provider(Protocol):
    """One provider's wire: the audio as it sends it, and its MIME type."""

    name: str

    async def speak(self, text: str, voice: str, format: AudioFormat) -> tuple[bytes, str]: ...


class Synthesizer:
    """A provider, and what makes its audio the format asked for."""

    def __init__(self, provider: Provider, voice: str) -> None:
        self.provider = provider
        self.voice = voice

    async def synthesize(
        self, text: str, voice: str | None = None, *, format: AudioFormat = "ogg_opus"
    ) -> SpokenAudio:
        """`text` spoken in `voice` (default: the configured one) as `format`."""
        text = text.strip()
        if not text:
            raise SpeechError("there is no text to speak")
        voice = (voice or "").strip() or self.voice
        if not VOICE_NAME.fullmatch(voice):
            raise SpeechError(f"{voice[:60]!r} is not a voice name")
        data, mime = await self.provider.speak(text, voice, format)
        if not data:
            raise SpeechError(f"{self.provider.name}: the answer holds no audio")
        return await finish(data, audio.sniff(data) or mime, format, self.provider.name)


async def finish(data: bytes, mime: str, format: AudioFormat, provider: str) -> SpokenAudio:
    """The audio as `format` where it can be: converted with ffmpeg when it is not already,
    a voice note left as it came when ffmpeg is missing."""
    if format == "ogg_opus":
        if not audio.is_ogg_opus(data):
            converted = await audio.convert(data, "ogg_opus")
            if converted is not None:
                data, mime = converted, audio.OGG
            elif mime == audio.WAV:
                data = audio.fixed_wav(data)
    elif mime != audio.WAV:
        converted = await audio.convert(data, "wav")
        if converted is None:
            raise SpeechError(f"{provider} makes {mime}: WAV needs ffmpeg (install it)")
        data, mime = converted, audio.WAV
    else:
        data = audio.fixed_wav(data)
    return SpokenAudio(data, mime, audio.duration(data))


def build_synthesizer(config: TtsConfig, secrets: Secrets) -> SpeechSynthesizer:
    """The synthesizer of the configured `tts:` provider, its key read from `secrets` when
    it speaks (so a key set later is used; a missing one is a SpeechError naming it)."""
    provider: Provider
    if config.provider == "openai":
        provider = OpenAISpeech(config, secrets)
    elif config.provider == "elevenlabs":
        provider = ElevenLabsSpeech(config, secrets)
    elif config.provider == "edge":
        from .edge import EdgeSpeech

        provider = EdgeSpeech(config.base_url)
    else:
        from .espeak import EspeakSpeech

        provider = EspeakSpeech()
    return Synthesizer(provider, config.voice)


def synthesizer_for(config: Config, secrets: Secrets) -> SpeechSynthesizer | None:
    """The synthesizer of `config`'s `tts:` section, None when there is none (what the
    local voice loop asks for)."""
    return build_synthesizer(config.tts, secrets) if config.tts is not None else None


def suffix_of(mime: str) -> str:
    """The file suffix of spoken audio of type `mime` (.ogg, .mp3, .wav)."""
    return {audio.OGG: ".ogg", audio.MPEG: ".mp3", audio.WAV: ".wav"}.get(mime, ".bin")
