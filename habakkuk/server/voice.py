"""Speech and Live mode (spec 001 "Chat" speech, "Live mode").

GET /api/chat/{conversation}/messages/{seq}/speech reads one of the agent's replies
aloud with the `tts:` provider, its Markdown stripped: the body is the audio as the
provider makes it (Ogg Opus, MP3 where it made MP3 and ffmpeg is not there to convert
it). 404 for a message that is not a reply, 413 over tts.max_chars, 502 when the provider
failed. Without tts: GET /api/app says `"speech": false` and the route answers 501.

Live mode is not in this version: `"realtime": false`, and its routes answer 501. Both
answer after the same checks as the rest of /api (host, token, JSON content type,
through the conventions middleware), never the 404 of a path that does not exist.
"""

from __future__ import annotations

from aiohttp import web

from habakkuk.voice.speech import SpeechError, SpeechSynthesizer, build_synthesizer
from habakkuk.voice.spoken_text import spoken

from .errors import ApiError
from .served import server_of

SPEECH_OFF = "speech is not configured: add a tts: section (GET /api/app says speech: false)"


class _Speaker:
    """The application's one synthesizer, made on the first request (so the edge
    provider keeps the clock skew it learned)."""

    synthesizer: SpeechSynthesizer | None = None


SPEAKER_KEY: web.AppKey[_Speaker] = web.AppKey("speaker", _Speaker)
REALTIME_OFF = (
    "Live mode is not configured: this version has no realtime: (GET /api/app says realtime: false)"
)
REALTIME_PATHS = ("session", "tool", "transcript", "end")


async def speech(request: web.Request) -> web.Response:
    """GET /api/chat/{conversation}/messages/{seq}/speech: a reply read aloud."""
    server = server_of(request)
    tts = server.runtime.config.tts
    if tts is None:
        raise ApiError(501, SPEECH_OFF)
    conversation = request.match_info["conversation"]
    seq = request.match_info["seq"]
    event = None
    if seq.isdigit() and len(seq) < 19:
        event = await server.web_store().event(conversation, int(seq))
    if event is None:
        raise ApiError(404, f"conversation {conversation} has no message {seq}")
    if event.role != "assistant":
        raise ApiError(404, f"message {seq} is not one of the agent's replies")
    text = spoken(event.text)
    if len(text) > tts.max_chars:
        raise ApiError(
            413, f"the reply is {len(text):,} characters; tts.max_chars is {tts.max_chars:,}"
        )
    if not text:
        raise ApiError(404, f"message {seq} has nothing to read aloud")
    speaker = request.app[SPEAKER_KEY]
    if speaker.synthesizer is None:
        speaker.synthesizer = build_synthesizer(tts, server.runtime.env)
    synthesizer = speaker.synthesizer
    try:
        audio = await synthesizer.synthesize(text)
    except SpeechError as exc:
        raise ApiError(502, str(exc)) from None
    return web.Response(
        body=audio.data, content_type=audio.mime, headers={"Cache-Control": "no-store"}
    )


async def realtime(request: web.Request) -> web.Response:
    """POST /api/realtime/{session,tool,transcript,end}: 501 without realtime."""
    raise ApiError(501, REALTIME_OFF)


def setup(app: web.Application) -> None:
    """Register the speech and Live mode routes."""
    app[SPEAKER_KEY] = _Speaker()
    app.router.add_get("/api/chat/{conversation}/messages/{seq}/speech", speech)
    for path in REALTIME_PATHS:
        app.router.add_post(f"/api/realtime/{path}", realtime)
