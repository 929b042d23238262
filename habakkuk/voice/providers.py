"""The keyed HTTP providers: OpenAI's POST /audio/speech and ElevenLabs'
POST /v1/text-to-speech/{voice_id}. Both are asked for Ogg Opus for a voice note and for
WAV (OpenAI) or raw 16-bit PCM (ElevenLabs, wrapped here) for the local loop.

The key goes only in a header to the configured URL; a provider's error is passed on in
one line, never the key.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from habakkuk.engine.http_read import read_upto

from . import audio
from .audio import SpeechError
from .speech_types import AudioFormat

if TYPE_CHECKING:
    from habakkuk.engine.tts_config import TtsConfig

MAX_AUDIO_BYTES = 64 * 1024 * 1024
REQUEST_SECONDS = 120.0
ELEVENLABS_PCM_RATE = 24000


class Secrets(Protocol):
    """Where keys are read from by variable name (engine.home.Environment, a dict)."""

    def get(self, name: str, /) -> str | None: ...


class _Keyed:
    """A provider whose key is read from its variable when it speaks."""

    name = ""

    def __init__(self, config: TtsConfig, secrets: Secrets) -> None:
        self.config = config
        self.secrets = secrets

    def key(self) -> str:
        value = (self.secrets.get(self.config.key_env) or "").strip()
        if not value:
            raise SpeechError(f"{self.name}: the API key variable {self.config.key_env} is not set")
        return value

    async def post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
        """POST `body` as JSON; the answer's bytes (SpeechError for any failure)."""
        import aiohttp

        try:
            async with (
                aiohttp.ClientSession(
                    timeout=aiohttp.ClientTimeout(total=REQUEST_SECONDS)
                ) as client,
                client.post(url, json=body, headers=headers, allow_redirects=False) as response,
            ):
                data = await read_upto(response.content, MAX_AUDIO_BYTES + 1)
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            why = str(exc)[:200] or type(exc).__name__
            raise SpeechError(f"{self.name}: cannot reach {url.split('?')[0]}: {why}") from None
        if status >= 400:
            raise SpeechError(f"{self.name}: HTTP {status}: {error_text(data)}")
        if len(data) > MAX_AUDIO_BYTES:
            raise SpeechError(f"{self.name}: the audio is over {MAX_AUDIO_BYTES:,} bytes")
        return data


class OpenAISpeech(_Keyed):
    """OpenAI's /audio/speech (response_format opus or wav)."""

    name = "openai"

    async def speak(self, text: str, voice: str, format: AudioFormat) -> tuple[bytes, str]:
        body = {
            "model": self.config.model,
            "input": text,
            "voice": voice,
            "response_format": "opus" if format == "ogg_opus" else "wav",
        }
        headers = {"Authorization": f"Bearer {self.key()}"}
        data = await self.post(f"{self.config.base_url}/audio/speech", body, headers)
        return data, audio.OGG if format == "ogg_opus" else audio.WAV


class ElevenLabsSpeech(_Keyed):
    """ElevenLabs' text-to-speech (output_format opus_48000_64, or pcm_24000 as WAV)."""

    name = "elevenlabs"

    async def speak(self, text: str, voice: str, format: AudioFormat) -> tuple[bytes, str]:
        output = "opus_48000_64" if format == "ogg_opus" else f"pcm_{ELEVENLABS_PCM_RATE}"
        url = (
            f"{self.config.base_url}/v1/text-to-speech/{quote(voice, safe='')}"
            f"?output_format={output}"
        )
        body = {"text": text, "model_id": self.config.model}
        data = await self.post(url, body, {"xi-api-key": self.key()})
        if format == "wav":
            return audio.pcm_wav(data, ELEVENLABS_PCM_RATE), audio.WAV
        return data, audio.OGG


def error_text(body: bytes) -> str:
    """A provider's error message ({"error": {"message"}}, {"detail": {"message"}}, ...)
    in one line."""
    text = body[:4000].decode("utf-8", errors="replace")
    try:
        value: Any = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300] or "no details"
    for key in ("error", "detail", "message"):
        if isinstance(value, dict) and key in value:
            value = value[key]
    if isinstance(value, dict):
        value = value.get("message", value)
    return " ".join(str(value).split())[:300]
