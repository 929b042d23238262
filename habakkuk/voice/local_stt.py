"""Offline speech to text: faster-whisper (CTranslate2) on the CPU, with the model folder
`transcription.model` names (`provider: local`, the `local-stt` extra).

Audio comes as 16 kHz mono WAV from `habakkuk talk` (read here, no converter needed) or
as Ogg Opus / MP3 / anything else from chats, decoded to 16 kHz mono in-process by PyAV,
the FFmpeg binding faster-whisper itself depends on: the extra alone decodes every voice
note, and the ffmpeg program is not needed (PyAV took 0.25x to 0.36x the time of an
ffmpeg subprocess for a voice note, benchmarks/local_stt_bench.py). One model per folder
is loaded per process, lazily, under a lock; recognition runs in a worker thread, off
the event loop (the model releases the GIL while it computes).
"""

from __future__ import annotations

import asyncio
import io
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .audio import WAV, sniff

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Samples = npt.NDArray[np.float32]

SAMPLE_RATE = 16_000  # what Whisper models hear
# Greedy decoding with int8 weights: 0.61x to 0.66x the time of the package's CPU defaults
# (beam 5, float32) on a 4.4 s utterance with tiny.en, int8 and the beam each taking a
# share, with one name and one word heard differently (benchmarks/local_stt_bench.py).
# A spoken turn waits on it.
BEAM_SIZE = 1


class LocalTranscriptionError(Exception):
    """The audio could not be decoded or the model could not run; one line saying which."""


class _Segment(Protocol):
    text: str


class _Model(Protocol):
    """What we use of faster_whisper.WhisperModel."""

    def transcribe(self, audio: Samples, **options: Any) -> tuple[Iterable[_Segment], Any]: ...


@dataclass(frozen=True)
class _Key:
    folder: str
    threads: int


def default_threads() -> int:
    """The CPU threads a model runs on when `transcription.threads` is not set: every core
    up to 4 (CTranslate2's own default is 4 whatever the machine, which oversubscribes a
    two-core one)."""
    return max(1, min(4, os.cpu_count() or 1))


_models: dict[_Key, _Model] = {}
_models_lock = threading.Lock()


def model_for(folder: str, threads: int | None) -> _Model:
    """The loaded model of `folder`, loaded on first use (once per process, whichever
    thread asks first; the others wait for it). LocalTranscriptionError when it fails."""
    key = _Key(folder, threads or default_threads())
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = _load(key)
            _models[key] = model
        return model


def _load(key: _Key) -> _Model:
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        raise LocalTranscriptionError(
            "local transcription needs faster-whisper: pip install 'habakkuk[local-stt]'"
        ) from None
    try:
        # int8 on the CPU: float16 weights are quantized at load (else run as float32,
        # which CPUs lack fast float16 for); see BEAM_SIZE for what it saves
        model: _Model = WhisperModel(
            key.folder, device="cpu", compute_type="int8", cpu_threads=key.threads
        )
    except (RuntimeError, ValueError, OSError) as exc:
        why = " ".join(str(exc).split())[:200]
        raise LocalTranscriptionError(f"cannot load the model in {key.folder}: {why}") from None
    return model


async def transcribe_local(
    folder: str, data: bytes, language: str | None = None, threads: int | None = None
) -> str:
    """The speech in `data` as text ("" when the model hears none), recognized by the
    model in `folder` in a worker thread. LocalTranscriptionError for audio that cannot
    be decoded or a model that cannot be loaded."""
    samples = await decode(data)
    return await asyncio.to_thread(_recognize, folder, threads, samples, language)


def _recognize(folder: str, threads: int | None, samples: Samples, language: str | None) -> str:
    model = model_for(folder, threads)
    if samples.size == 0:
        return ""
    try:
        segments, _info = model.transcribe(
            samples,
            language=language,
            beam_size=BEAM_SIZE,
            # each utterance stands alone: carrying text over is what makes Whisper
            # repeat itself on a long recording
            condition_on_previous_text=False,
        )
        return " ".join(segment.text.strip() for segment in segments).strip()
    except (RuntimeError, ValueError) as exc:
        why = " ".join(str(exc).split())[:200]
        raise LocalTranscriptionError(f"local transcription failed: {why}") from None


async def decode(data: bytes) -> Samples:
    """`data` as 16 kHz mono float32 samples: a 16 kHz 16-bit WAV read directly, anything
    else decoded in a worker thread by PyAV (faster-whisper's own decoder)."""
    if sniff(data) == WAV:
        samples = _read_wav(data)
        if samples is not None:
            return samples
    return await asyncio.to_thread(_decode_with_pyav, data)


def _read_wav(data: bytes) -> Samples | None:
    """The samples of a 16 kHz 16-bit PCM WAV (channels averaged), read by the talk
    loop's own reader (wav.py); None for any other WAV, which goes to the decoder."""
    from .wav import read_wav

    try:
        pcm = read_wav(data)
    except ValueError:
        return None
    if pcm.rate != SAMPLE_RATE:
        return None
    samples: Samples = pcm.samples.mean(axis=1, dtype="float32")
    return samples


def _decode_with_pyav(data: bytes) -> Samples:
    try:
        from faster_whisper.audio import decode_audio
    except ImportError:
        raise LocalTranscriptionError(
            "local transcription needs faster-whisper: pip install 'habakkuk[local-stt]'"
        ) from None
    import av

    try:
        samples: Samples = decode_audio(io.BytesIO(data), sampling_rate=SAMPLE_RATE)
    except (av.FFmpegError, ValueError, IndexError) as exc:
        why = " ".join(str(exc).split())[:200]
        raise LocalTranscriptionError(f"cannot decode the audio: {why}") from None
    return samples
