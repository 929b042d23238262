"""The fake camera and microphone of an attendance: one second of silence (a WAV) and
one black frame (a Y4M), written beside the browser's profile, so the page finds devices
and nobody sees or hears anything."""

from __future__ import annotations

import struct
from pathlib import Path

RATE = 16_000
WIDTH, HEIGHT = 320, 240


def silence_wav(seconds: float = 1.0) -> bytes:
    """A mono 16-bit PCM WAV of silence."""
    frames = int(RATE * seconds)
    data = b"\x00\x00" * frames
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, RATE, RATE * 2, 2, 16)
    return header + fmt + b"data" + struct.pack("<I", len(data)) + data


def black_y4m() -> bytes:
    """One black 4:2:0 frame as a Y4M video."""
    luma = bytes([16]) * (WIDTH * HEIGHT)
    chroma = bytes([128]) * (WIDTH * HEIGHT // 2)
    head = f"YUV4MPEG2 W{WIDTH} H{HEIGHT} F1:1 Ip A1:1 C420jpeg\n".encode()
    return head + b"FRAME\n" + luma + chroma


def write_fake_media(folder: Path) -> tuple[Path, Path]:
    """Write the silence and the black frame into `folder`; (audio, video)."""
    audio, video = folder / "silence.wav", folder / "black.y4m"
    audio.write_bytes(silence_wav())
    video.write_bytes(black_y4m())
    return audio, video


def media_flags(audio: Path, video: Path) -> tuple[str, ...]:
    """Chrome's flags granting the fake devices without asking."""
    return (
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={audio}",
        f"--use-file-for-fake-video-capture={video}",
    )
