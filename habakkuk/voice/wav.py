"""WAV in and out: 16-bit PCM, what the transcription endpoint takes and the speakers play."""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .detector import RATE


@dataclass(frozen=True)
class Pcm:
    """Decoded audio: float32 samples in [-1, 1], frames x channels, and their rate."""

    samples: npt.NDArray[np.float32]
    rate: int

    @property
    def seconds(self) -> float:
        """Its length."""
        return len(self.samples) / self.rate if self.rate else 0.0


def to_wav(samples: npt.NDArray[np.float32], rate: int = RATE) -> bytes:
    """Mono float samples as a 16-bit PCM WAV file."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return out.getvalue()


def read_wav(data: bytes) -> Pcm:
    """A 16-bit PCM WAV file's samples; ValueError when it is not one."""
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
            raw = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"not a WAV file: {exc}") from None
    if width != 2:
        raise ValueError(f"WAV with {8 * width}-bit samples; 16-bit PCM expected")
    ints = np.frombuffer(raw[: len(raw) - len(raw) % (2 * channels)], dtype="<i2")
    samples = (ints.astype(np.float32) / 32768.0).reshape(-1, channels)
    return Pcm(samples, rate)
