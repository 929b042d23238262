"""Audio bytes: what they are (sniffed, never trusted from a name), how long they play,
and ffmpeg's conversions between them.

Voice notes are Ogg Opus; the local loop plays 16-bit PCM WAV. A duration comes from
the bytes themselves: a WAV's byte rate and data size, an Ogg stream's last granule
position (48 kHz for Opus) less its pre-skip. ffmpeg is optional: without it a format
that cannot be had is said so (`convert` returns None), never a traceback.
"""

from __future__ import annotations

import asyncio
import shutil
import struct

from .speech_types import AudioFormat

OGG = "audio/ogg"
MPEG = "audio/mpeg"
WAV = "audio/wav"
CONVERT_SECONDS = 120.0
_STREAMING_SIZES = (0, 0xFFFFFFFF, 0x7FFFFFFF, 0x7FFFF000)


def sniff(data: bytes) -> str | None:
    """The MIME type of audio bytes (Ogg, WAV, MP3), None for anything else."""
    if data[:4] == b"OggS":
        return OGG
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return WAV
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return MPEG
    return None


def is_ogg_opus(data: bytes) -> bool:
    """True for an Ogg stream whose first packet is an Opus header."""
    return data[:4] == b"OggS" and b"OpusHead" in data[:200]


def wav_chunks(data: bytes) -> tuple[bytes, int, int] | None:
    """(the fmt chunk, the data chunk's offset, its length) of a RIFF/WAVE file; a
    length written as "unknown" by a streaming writer is what the file holds."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    fmt: bytes | None = None
    at = 12
    while at + 8 <= len(data):
        name, size = data[at : at + 4], struct.unpack_from("<I", data, at + 4)[0]
        body = at + 8
        if name == b"fmt ":
            fmt = data[body : body + size]
        elif name == b"data":
            held = len(data) - body
            return (
                (fmt, body, held if size in _STREAMING_SIZES or size > held else size)
                if (fmt is not None)
                else None
            )
        at = body + size + (size & 1)
    return None


def wav_duration(data: bytes) -> float | None:
    """Seconds a WAV plays (its data over its byte rate); None when it is not one."""
    found = wav_chunks(data)
    if found is None or len(found[0]) < 16:
        return None
    fmt, _, length = found
    byte_rate = struct.unpack_from("<I", fmt, 8)[0]
    return length / byte_rate if byte_rate else None


def fixed_wav(data: bytes) -> bytes:
    """A WAV whose RIFF and data sizes are the real ones (a streaming writer, espeak-ng's
    --stdout or ffmpeg's pipe, leaves them unknown, which some players refuse)."""
    found = wav_chunks(data)
    if found is None:
        return data
    _, body, length = found
    data = data[: body + length]
    return b"".join(
        (
            data[:4],
            struct.pack("<I", len(data) - 8),
            data[8 : body - 4],
            struct.pack("<I", length),
            data[body:],
        )
    )


def pcm_wav(pcm: bytes, rate: int, channels: int = 1) -> bytes:
    """16-bit little-endian PCM wrapped in a WAV header."""
    block = channels * 2
    header = b"".join(
        (
            b"RIFF",
            struct.pack("<I", 36 + len(pcm)),
            b"WAVEfmt ",
            struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * block, block, 16),
            b"data",
            struct.pack("<I", len(pcm)),
        )
    )
    return header + pcm


def ogg_duration(data: bytes) -> float | None:
    """Seconds an Ogg Opus stream plays: its last page's granule position (48 kHz
    samples) less the pre-skip its OpusHead names; None when it is not one."""
    last = data.rfind(b"OggS")
    if last < 0 or last + 14 > len(data) or not is_ogg_opus(data):
        return None
    granule = struct.unpack_from("<q", data, last + 6)[0]
    head = data.find(b"OpusHead")
    pre_skip = struct.unpack_from("<H", data, head + 10)[0] if head + 12 <= len(data) else 0
    return max(0.0, (granule - pre_skip) / 48000) if granule >= 0 else None


def duration(data: bytes) -> float | None:
    """Seconds the audio plays, where its format tells (WAV, Ogg Opus)."""
    kind = sniff(data)
    if kind == WAV:
        return wav_duration(data)
    if kind == OGG:
        return ogg_duration(data)
    return None


def ffmpeg() -> str | None:
    """The ffmpeg on PATH, None when it is not installed."""
    return shutil.which("ffmpeg")


async def convert(data: bytes, to: AudioFormat) -> bytes | None:
    """`data` as Ogg Opus (mono, 48 kHz, for voice notes) or 16-bit mono PCM WAV, by
    ffmpeg; None when ffmpeg is not installed. SpeechError when it fails."""
    binary = ffmpeg()
    if binary is None:
        return None
    if to == "ogg_opus":
        # 32 kb/s mono is what messengers' own voice notes use; compression level 5 of
        # 10 halves libopus's time for a size within 2 % (benchmarks/voice_out_bench.py).
        codec = ["-c:a", "libopus", "-b:a", "32k", "-ar", "48000", "-application", "voip"]
        codec += ["-compression_level", "5"]
        out = [*codec, "-f", "ogg"]
    else:
        out = ["-c:a", "pcm_s16le", "-f", "wav"]
    command = [binary, "-hide_banner", "-loglevel", "error", "-i", "pipe:0", "-vn", "-ac", "1"]
    stdout, stderr, code = await run_piped(
        [*command, *out, "pipe:1"], data, CONVERT_SECONDS, "ffmpeg"
    )
    if code != 0 or not stdout:
        why = " ".join(stderr.decode(errors="replace").split())[:200] or "no output"
        raise SpeechError(f"ffmpeg could not convert the audio: {why}")
    return fixed_wav(stdout) if to == "wav" else stdout


async def run_piped(
    command: list[str], data: bytes, seconds: float, what: str
) -> tuple[bytes, bytes, int]:
    """Run `command` with `data` on stdin: (stdout, stderr, exit code). A process past
    `seconds`, or whose caller is cancelled, is killed (SpeechError for the first)."""
    from habakkuk.engine.timeouts import wait_within

    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await wait_within(process.communicate(data), seconds)
    except TimeoutError:
        raise SpeechError(f"{what} took over {seconds:.0f}s") from None
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return stdout, stderr, process.returncode or 0


class SpeechError(Exception):
    """Speech could not be made (the provider refused, the network failed, a converter
    is missing); the message says which, in one line, without the key."""
