"""edge: the browser's free read-aloud service, over its websocket (no key, no account).

One connection per request: a `speech.config` text frame (the MP3 output format), then
the SSML as a `ssml` text frame; back come text frames (turn.start, response,
audio.metadata) and binary frames whose first two bytes are the big-endian length of a
header block, the audio after it, until a `turn.end` text frame.

The service wants a token derived from the time (Sec-MS-GEC: the Windows file time,
rounded down to five minutes, hashed with the client token). A machine whose clock is
off is refused with 403; its answer's Date header gives the skew, and the request is
made once more with the token recomputed from the server's time. The skew is kept for
the process's later requests.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from email.utils import parsedate_to_datetime
from xml.sax.saxutils import escape

from . import audio
from .audio import SpeechError
from .speech_types import AudioFormat

TRUSTED_CLIENT_TOKEN = "6A5AA1D4EAFF4E9FB37E23D68491D6F4"
CHROMIUM_VERSION = "130.0.2849.68"
GEC_VERSION = f"1-{CHROMIUM_VERSION}"
WIN_EPOCH = 11644473600  # seconds from 1601-01-01 (Windows file time) to 1970-01-01
OUTPUT_FORMAT = "audio-24khz-48kbitrate-mono-mp3"
MAX_TEXT_BYTES = 60_000  # under the service's 64 KiB frame, with the SSML around it
RECEIVE_SECONDS = 60.0
HEADERS = {
    "Pragma": "no-cache",
    "Cache-Control": "no-cache",
    "Origin": "chrome-extension://jdiccldimpdaibmpdkjnbmckianbfold",
    "User-Agent": (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"Chrome/{CHROMIUM_VERSION.split('.')[0]}.0.0.0 Safari/537.36 "
        f"Edg/{CHROMIUM_VERSION.split('.')[0]}.0.0.0"
    ),
}
# Characters the service refuses (a vertical tab in OCR'd text breaks the connection).
_REFUSED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_SHORT_VOICE = re.compile(r"([a-z]{2,3})-([A-Z]{2})-([\w-]+Neural)")


def gec_token(unix_seconds: float) -> str:
    """The Sec-MS-GEC token for a moment: the Windows file time (100 ns ticks since
    1601) rounded down to five minutes, followed by the client token, SHA-256, upper hex."""
    seconds = int(unix_seconds) + WIN_EPOCH
    seconds -= seconds % 300
    ticks = seconds * 10_000_000
    return hashlib.sha256(f"{ticks}{TRUSTED_CLIENT_TOKEN}".encode("ascii")).hexdigest().upper()


def voice_name(voice: str) -> str:
    """The service's long voice name for a short one (en-US-EmmaNeural)."""
    found = _SHORT_VOICE.fullmatch(voice)
    if found is None:
        return voice
    language, region, name = found.groups()
    if "-" in name:  # zh-CN-liaoning-XiaobeiNeural: the region is zh-CN-liaoning
        more, _, name = name.partition("-")
        region = f"{region}-{more}"
    return f"Microsoft Server Speech Text to Speech Voice ({language}-{region}, {name})"


def ssml(text: str, voice: str) -> str:
    """The SSML of one request: the text escaped, in the voice, at normal prosody."""
    spoken = escape(_REFUSED.sub(" ", text))
    return (
        "<speak version='1.0' xmlns='http://www.w3.org/2001/10/synthesis' xml:lang='en-US'>"
        f"<voice name='{escape(voice_name(voice), {chr(39): '&apos;'})}'>"
        "<prosody pitch='+0Hz' rate='+0%' volume='+0%'>"
        f"{spoken}</prosody></voice></speak>"
    )


def _js_date() -> str:
    # The browser writes a JavaScript Date string; the service reads it so.
    return time.strftime(
        "%a %b %d %Y %H:%M:%S GMT+0000 (Coordinated Universal Time)", time.gmtime()
    )


def split_headers(data: bytes) -> tuple[dict[str, str], bytes]:
    """A frame's `Name:value` header lines and the body after the blank line."""
    head, _, body = data.partition(b"\r\n\r\n")
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.decode(errors="replace").strip()] = value.decode(errors="replace").strip()
    return headers, body


class EdgeSpeech:
    """The read-aloud websocket at `url`."""

    name = "edge"

    def __init__(self, url: str) -> None:
        self.url = url
        self.skew = 0.0  # the server's clock less ours, learned from a 403's Date

    def token(self) -> str:
        return gec_token(time.time() + self.skew)

    async def speak(self, text: str, voice: str, format: AudioFormat) -> tuple[bytes, str]:
        import aiohttp

        if len(text.encode()) > MAX_TEXT_BYTES:
            raise SpeechError(f"edge: the text is over {MAX_TEXT_BYTES:,} bytes")
        try:
            return await self._once(text, voice), audio.MPEG
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status != 403:
                raise SpeechError(
                    f"edge: the service refused the connection: HTTP {exc.status}"
                ) from None
            self._learn_skew(exc.headers)
        try:
            return await self._once(text, voice), audio.MPEG
        except aiohttp.WSServerHandshakeError as exc:
            raise SpeechError(
                f"edge: the service refused the connection: HTTP {exc.status} (after setting "
                "the token from its clock)"
            ) from None

    def _learn_skew(self, headers: object) -> None:
        date = headers.get("Date") if hasattr(headers, "get") else None
        if not isinstance(date, str):
            raise SpeechError("edge: the service refused the token (HTTP 403) and sent no Date")
        try:
            server = parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            raise SpeechError(
                f"edge: HTTP 403 with a Date that is not one: {date[:60]!r}"
            ) from None
        self.skew = server - time.time()

    async def _once(self, text: str, voice: str) -> bytes:
        import aiohttp

        connection = uuid.uuid4().hex
        url = (
            f"{self.url}?TrustedClientToken={TRUSTED_CLIENT_TOKEN}&ConnectionId={connection}"
            f"&Sec-MS-GEC={self.token()}&Sec-MS-GEC-Version={GEC_VERSION}"
        )
        timeout = aiohttp.ClientTimeout(total=RECEIVE_SECONDS)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as client,
                client.ws_connect(url, headers=HEADERS, max_msg_size=0) as socket,
            ):
                date = _js_date()
                await socket.send_str(
                    f"X-Timestamp:{date}\r\nContent-Type:application/json; charset=utf-8\r\n"
                    "Path:speech.config\r\n\r\n"
                    '{"context":{"synthesis":{"audio":{"metadataoptions":{'
                    '"sentenceBoundaryEnabled":"false","wordBoundaryEnabled":"false"},'
                    f'"outputFormat":"{OUTPUT_FORMAT}"}}}}}}\r\n'
                )
                await socket.send_str(
                    f"X-RequestId:{uuid.uuid4().hex}\r\nContent-Type:application/ssml+xml\r\n"
                    f"X-Timestamp:{date}Z\r\nPath:ssml\r\n\r\n{ssml(text, voice)}"
                )
                return await _receive(socket)
        except aiohttp.WSServerHandshakeError:
            raise
        except (aiohttp.ClientError, TimeoutError) as exc:
            why = str(exc)[:200] or type(exc).__name__
            raise SpeechError(f"edge: cannot reach the read-aloud service: {why}") from None


async def _receive(socket: object) -> bytes:
    """The audio of one turn: binary frames' bodies until turn.end."""
    import aiohttp

    assert isinstance(socket, aiohttp.ClientWebSocketResponse)
    chunks: list[bytes] = []
    async for message in socket:
        if message.type == aiohttp.WSMsgType.TEXT:
            headers, _ = split_headers(message.data.encode())
            # Paths are dotted words; the turn ends with turn.end (read by its words, as a
            # wire path, so it is never taken for one of our own event kinds).
            if headers.get("Path", "").split(".") == ["turn", "end"]:
                break
        elif message.type == aiohttp.WSMsgType.BINARY:
            data: bytes = message.data
            if len(data) < 2:
                raise SpeechError("edge: an audio frame without its header length")
            length = int.from_bytes(data[:2], "big")
            if len(data) < 2 + length:
                raise SpeechError("edge: an audio frame shorter than its header")
            headers, _ = split_headers(data[2 : 2 + length] + b"\r\n\r\n")
            if headers.get("Path") == "audio":
                chunks.append(data[2 + length :])
        elif message.type in (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSED):
            break
    else:
        raise SpeechError("edge: the service closed the connection before turn.end")
    if not chunks or not any(chunks):
        raise SpeechError("edge: no audio came back (is the voice name right?)")
    return b"".join(chunks)
