"""Speech to text: the one client of an OpenAI-compatible /audio/transcriptions endpoint.

Voice notes in any channel and recordings sent to the web chat go through it
(`transcription:` in config names the endpoint, its key variable and model).
"""

from __future__ import annotations

from typing import Literal

from habakkuk.engine.config import TranscriptionConfig
from habakkuk.engine.home import Environment


class TranscriptionError(Exception):
    """The service failed (`failed`) or heard no speech (`empty`); the message says which."""

    def __init__(self, message: str, kind: Literal["failed", "empty"] = "failed"):
        super().__init__(message)
        self.kind = kind


async def transcribe(
    settings: TranscriptionConfig, env: Environment, data: bytes, name: str, media_type: str
) -> str:
    """The recording's text; TranscriptionError when the service fails or hears nothing."""
    import aiohttp

    headers = {}
    if settings.key_env:
        key = env.get(settings.key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
    form = aiohttp.FormData()
    form.add_field("model", settings.model)
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
