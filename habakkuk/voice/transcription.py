"""Speech to text: an OpenAI-compatible /audio/transcriptions endpoint, or offline.

Voice notes in any channel, recordings sent to the web chat and `talk` go through it
(`transcription:` in config names the endpoint, its key variable and model), or, with
`provider: local`, through faster-whisper on this machine (habakkuk/voice/local_stt.py).
"""

from __future__ import annotations

from typing import Literal

from habakkuk.engine.home import Environment
from habakkuk.engine.transcription_config import TranscriptionConfig


class TranscriptionError(Exception):
    """The service failed (`failed`) or heard no speech (`empty`); the message says which."""

    def __init__(self, message: str, kind: Literal["failed", "empty"] = "failed"):
        super().__init__(message)
        self.kind = kind


async def transcribe(
    settings: TranscriptionConfig, env: Environment, data: bytes, name: str, media_type: str
) -> str:
    """The recording's text; TranscriptionError when the service fails or hears nothing.
    The one entry point: chats' voice notes, the web chat's recordings and `talk` call it."""
    if settings.provider == "local":
        return await _transcribe_locally(settings, data)
    import aiohttp

    headers = {}
    if settings.key_env:
        key = env.get(settings.key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
    form = aiohttp.FormData()
    form.add_field("model", settings.model)
    if settings.language:
        form.add_field("language", settings.language)
    form.add_field("file", data, filename=name, content_type=media_type or "audio/ogg")
    url = settings.base_url.rstrip("/") + "/audio/transcriptions"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http,
            http.post(url, data=form, headers=headers) as response,
        ):
            if response.status != 200:
                detail = (await response.text())[:200]
                raise TranscriptionError(f"transcription failed: HTTP {response.status} {detail}")
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise TranscriptionError(f"transcription failed: {exc}") from None
    text = str(body.get("text", "")).strip() if isinstance(body, dict) else ""
    if not text:
        raise TranscriptionError("the recording had no speech in it", "empty")
    return text


async def _transcribe_locally(settings: TranscriptionConfig, data: bytes) -> str:
    from habakkuk.voice.local_stt import LocalTranscriptionError, transcribe_local

    try:
        text = await transcribe_local(settings.model, data, settings.language, settings.threads)
    except LocalTranscriptionError as exc:
        raise TranscriptionError(str(exc)) from None
    if not text:
        raise TranscriptionError("the recording had no speech in it", "empty")
    return text
