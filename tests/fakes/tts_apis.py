"""Fake speech APIs on 127.0.0.1, speaking the providers' real shapes.

- OpenAI (base {url}/v1): POST /audio/speech, JSON {model, input, voice,
  response_format: opus | wav} with a bearer key -> the audio (Ogg Opus, or WAV whose
  sizes are left "unknown" as a streaming writer leaves them); a wrong key is a 401 with
  {"error": {"message"}}.
- ElevenLabs (base {url}): POST /v1/text-to-speech/{voice_id}?output_format=
  opus_48000_64 | pcm_24000, JSON {text, model_id}, key in xi-api-key -> Ogg Opus, or raw
  16-bit PCM at 24 kHz.
- edge (ws://{url}/edge/v1): the read-aloud websocket. The handshake's Sec-MS-GEC must be
  the token of the fake's own clock (`skew` seconds off the real one), computed here from
  the description (Windows file time ticks, rounded down to five minutes, then SHA-256
  with the client token), not by the code under test; a wrong token is a 403 carrying the
  fake's Date. Then it reads speech.config and the SSML frames and answers turn.start,
  the audio in binary frames (two-byte big-endian header length, the header, the audio)
  and turn.end.

Every request is recorded in `seen`; the edge frames in `frames`.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.loopback import serve_on_loopback

KEY = "sk-voice-test"
CLIENT_TOKEN = "6A5AA1D4EAFF4E9FB37E23D68491D6F4"


def ogg_opus(seconds: float, pre_skip: int = 312) -> bytes:
    """A minimal Ogg Opus stream: an OpusHead page and a last page whose granule position
    says `seconds` at 48 kHz after the pre-skip (what a duration is read from)."""

    def page(kind: int, granule: int, sequence: int, packet: bytes) -> bytes:
        header = struct.pack("<4sBBqIIIB", b"OggS", 0, kind, granule, 7, sequence, 0, 1)
        return header + bytes([len(packet)]) + packet

    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, pre_skip, 48000, 0, 0)
    tags = b"OpusTags" + struct.pack("<I", 4) + b"fake" + struct.pack("<I", 0)
    last = pre_skip + round(seconds * 48000)
    return page(2, 0, 0, head) + page(0, 0, 1, tags) + page(4, last, 2, b"\xfc" * 40)


def streaming_wav(pcm: bytes, rate: int = 24000) -> bytes:
    """A mono 16-bit WAV whose RIFF and data sizes are 0xFFFFFFFF (a streamed answer)."""
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    return b"RIFF\xff\xff\xff\xffWAVEfmt " + fmt + b"data\xff\xff\xff\xff" + pcm


def edge_token(unix_seconds: float) -> str:
    """Sec-MS-GEC as the service checks it (the description, written independently)."""
    ticks = int((unix_seconds + 11644473600) * 10_000_000)
    ticks -= ticks % 3_000_000_000
    return hashlib.sha256(f"{ticks}{CLIENT_TOKEN}".encode("ascii")).hexdigest().upper()


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeTts:
    """The three speech APIs on one loopback port."""

    # what each answers: the edge audio (MP3 bytes, sent in three frames)
    edge_audio: bytes = b""
    skew: float = 0.0  # the fake's clock less the real one (the edge token's clock)
    refuse_every_token: bool = False
    seen: list[Seen] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def edge_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/edge/v1"

    async def __aenter__(self) -> FakeTts:
        app = web.Application()
        app.router.add_post("/v1/audio/speech", self._openai)
        app.router.add_post("/v1/text-to-speech/{voice}", self._elevenlabs)
        app.router.add_get("/edge/v1", self._edge)
        self._runner, self.port = await serve_on_loopback(app)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _record(self, request: web.Request) -> Seen:
        body: Any = None
        if request.can_read_body:
            body = await request.json()
        seen = Seen(request.method, request.path, dict(request.query), dict(request.headers), body)
        self.seen.append(seen)
        return seen

    async def _openai(self, request: web.Request) -> web.Response:
        seen = await self._record(request)
        if seen.headers.get("Authorization") != f"Bearer {KEY}":
            error = {"error": {"message": "Incorrect API key provided", "type": "invalid"}}
            return web.json_response(error, status=401)
        if seen.body["response_format"] == "opus":
            return web.Response(body=ogg_opus(2.0), content_type="audio/ogg")
        return web.Response(body=streaming_wav(b"\x00\x01" * 24000), content_type="audio/wav")

    async def _elevenlabs(self, request: web.Request) -> web.Response:
        seen = await self._record(request)
        if seen.headers.get("xi-api-key") != KEY:
            error = {"detail": {"status": "invalid_api_key", "message": "Invalid API key"}}
            return web.json_response(error, status=401)
        if seen.query.get("output_format") == "opus_48000_64":
            return web.Response(body=ogg_opus(1.5), content_type="audio/ogg")
        return web.Response(body=b"\x00\x02" * 24000, content_type="audio/pcm")

    async def _edge(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(
            Seen("GET", request.path, dict(request.query), dict(request.headers), None)
        )
        now = time.time() + self.skew
        token = request.query.get("Sec-MS-GEC", "")
        if (
            self.refuse_every_token
            # the client's clock, set from a Date of whole seconds, may trail by one
            or token not in (edge_token(now), edge_token(now - 2))
            or request.query.get("TrustedClientToken") != CLIENT_TOKEN
            or not request.query.get("Sec-MS-GEC-Version", "").startswith("1-")
        ):
            return web.Response(status=403, headers={"Date": formatdate(now, usegmt=True)})
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        for _ in range(2):
            message = await socket.receive()
            assert message.type == WSMsgType.TEXT
            self.frames.append(str(message.data))
        request_id = "X-RequestId:abc\r\n"
        await socket.send_str(f"{request_id}Path:turn.start\r\n\r\n{{}}")
        await socket.send_str(f"{request_id}Path:response\r\n\r\n{{}}")
        third = max(1, len(self.edge_audio) // 3)
        header = f"{request_id}Content-Type:audio/mpeg\r\nPath:audio\r\n".encode()
        for at in range(0, len(self.edge_audio), third):
            chunk = self.edge_audio[at : at + third]
            await socket.send_bytes(len(header).to_bytes(2, "big") + header + chunk)
        metadata = json.dumps({"Metadata": [{"Type": "SessionEnd", "Data": {}}]})
        await socket.send_str(f"{request_id}Path:audio.metadata\r\n\r\n{metadata}")
        await socket.send_str(f"{request_id}Path:turn.end\r\n\r\n{{}}")
        await socket.close()
        return socket
