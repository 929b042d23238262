"""The voice loop's own costs, each beside its target (issue 31):

1. VAD and framing: CPU per second of audio for what the capture callback and the
   energy detector do with each 20 ms frame (int16 -> float32 copy, RMS, the state
   machine), over a minute of room noise with speech-like bursts. Target <= 1 % of a core.
2. End of speech to the first reply audio, with instant fakes (the transcriber answers at
   once, the mock model replies at once, the synthesizer returns a short WAV at once, the
   speaker notes when it is handed the audio): the detector's end of the utterance to
   the speaker's play(), through the real runtime (the turn queued, claimed, run and
   waited on, on SQLite). Target <= 300 ms of our own overhead.
3. Barge-in to silence: a reply playing through PortAudio (a PulseAudio null sink this
   script starts when PulseAudio is installed and PULSE_SERVER is unset), speech frames
   fed until the detector starts speech, to the playback's return (the stream aborted
   and its finished callback run). Target <= 100 ms.

Usage: python benchmarks/voice_bench.py [--repeat 5] [--turns 10]
The machine's load is printed first: figures are medians of alternating repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from habakkuk.voice.detector import FRAME, RATE, EnergyDetector
from habakkuk.voice.speech_types import AudioFormat, SpokenAudio
from habakkuk.voice.wav import Pcm, to_wav

RNG = np.random.default_rng(1)


def room(seconds: float) -> np.ndarray[Any, np.dtype[np.int16]]:
    """Room noise with a 1.5 s burst of speech-loud noise every 5 s, as int16 samples."""
    audio = RNG.standard_normal(int(seconds * RATE)).astype(np.float32) * 0.003
    for start in range(RATE, len(audio) - 2 * RATE, 5 * RATE):
        audio[start : start + 3 * RATE // 2] *= 40
    return (np.clip(audio, -1, 1) * 32767).astype(np.int16)


def vad_cost(seconds: float = 60.0) -> float:
    """CPU seconds per second of audio: framing (the callback's copy) plus the detector."""
    samples = room(seconds).reshape(-1, 1)
    detector = EnergyDetector()
    started = time.process_time()
    for i in range(len(samples) // FRAME):
        block = samples[i * FRAME : (i + 1) * FRAME]
        frame = np.array(block[:, 0], dtype=np.float32) / 32768.0  # what the callback copies
        detector.feed(frame)
    return (time.process_time() - started) / seconds


class InstantSpeech:
    """A synthesizer that answers at once with 0.2 s of tone."""

    async def synthesize(
        self, text: str, voice: str | None = None, *, format: AudioFormat = "ogg_opus"
    ) -> SpokenAudio:
        t = np.arange(RATE // 5) / RATE
        return SpokenAudio(
            to_wav((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)), "audio/wav", 0.2
        )


class NotingSpeaker:
    """A speaker that notes when it is handed audio and "plays" it at once."""

    def __init__(self) -> None:
        self.handed: list[float] = []

    async def play(self, pcm: Pcm) -> bool:
        self.handed.append(time.monotonic())
        return True

    def stop(self) -> None:
        pass


class FedMicrophone:
    """Frames the benchmark puts in."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[np.ndarray[Any, np.dtype[np.float32]]] = asyncio.Queue()

    async def frame(self) -> np.ndarray[Any, np.dtype[np.float32]]:
        return await self.queue.get()


def utterance_frames() -> list[np.ndarray[Any, np.dtype[np.float32]]]:
    """0.5 s of quiet, 1 s of speech-loud tone, 0.8 s of quiet (the silence that ends it)."""
    t = np.arange(RATE) / RATE
    speech = (0.2 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    quiet = np.zeros(RATE // 2 + int(0.8 * RATE), dtype=np.float32)
    audio = np.concatenate([quiet[: RATE // 2], speech, quiet[RATE // 2 :]])
    return [audio[i : i + FRAME] for i in range(0, len(audio), FRAME)]


async def reply_latency(turns: int) -> list[float]:
    """Seconds from the detector's end of each utterance to the speaker's play()."""
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime
    from habakkuk.voice.talk import TalkLoop, TalkSettings

    with tempfile.TemporaryDirectory() as folder:
        home = Home(Path(folder))
        home.prepare()
        home.config_path.write_text(
            "providers:\n  mock:\n    type: mock\n    script:\n      - text: 'Three cards.'\n"
            "agents:\n  main:\n    model: mock/x\n    mode: full\n",
            encoding="utf-8",
        )
        runtime = await Runtime.open(home)
        try:
            runtime.start_workers(channels=False)
            session = await runtime.sessions.new_session(None, origin="cli")
            microphone, speaker = FedMicrophone(), NotingSpeaker()

            async def instant(wav: bytes) -> str:
                return "what is on my board"

            loop = TalkLoop(
                microphone=microphone,
                speaker=speaker,
                transcribe=instant,
                turns=runtime.turns,
                session_id=session.id,
                synthesizer=InstantSpeech(),
                settings=TalkSettings(),
                say=lambda line: None,
            )
            running = asyncio.create_task(loop.run())
            latencies: list[float] = []
            for n in range(turns):
                for frame in utterance_frames():
                    microphone.queue.put_nowait(frame)
                while loop.replies <= n:  # noqa: ASYNC110  the loop has no event for this
                    await asyncio.sleep(0.001)
                latencies.append(speaker.handed[-1] - loop.timings.utterance_at)
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            return latencies
        finally:
            await runtime.close()


@contextlib.contextmanager
def pulse_sink() -> Iterator[str]:
    """A PulseAudio server with a null sink (when installed and none is configured)."""
    if os.environ.get("PULSE_SERVER") or shutil.which("pulseaudio") is None:
        yield os.environ.get("PULSE_SERVER", "")
        return
    folder = Path(tempfile.mkdtemp(prefix="hk-bench-"))
    socket = folder / "native"
    env = {**os.environ, "HOME": str(folder), "XDG_RUNTIME_DIR": str(folder)}
    process = subprocess.Popen(
        [
            "pulseaudio",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
            "-n",
            f"--load=module-native-protocol-unix socket={socket} auth-anonymous=1",
            "--load=module-null-sink sink_name=speakers",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = f"unix:{socket}"
    try:
        for _ in range(200):
            probe = subprocess.run(
                ["pactl", "info"], env={**env, "PULSE_SERVER": server}, capture_output=True
            )
            if probe.returncode == 0:
                break
            time.sleep(0.05)
        os.environ["PULSE_SERVER"] = server
        yield server
    finally:
        os.environ.pop("PULSE_SERVER", None)
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


async def barge_in(repeat: int) -> list[float]:
    """Seconds from the frame that starts speech to the reply's playback returning."""
    from habakkuk.voice.audio_io import StreamSpeaker, load_sounddevice

    sd = load_sounddevice()
    speaker = StreamSpeaker(sd)
    t = np.arange(5 * RATE) / RATE
    reply = Pcm((0.2 * np.sin(2 * np.pi * 300 * t)).astype(np.float32).reshape(-1, 1), RATE)
    loud = (0.3 * np.sin(2 * np.pi * 200 * np.arange(FRAME) / RATE)).astype(np.float32)
    times: list[float] = []
    for _ in range(repeat):
        detector = EnergyDetector()
        detector.playing = True
        playing = asyncio.create_task(speaker.play(reply))
        await asyncio.sleep(0.5)  # well into the reply
        started = 0.0
        while not started:
            if detector.feed(loud):
                started = time.monotonic()
                speaker.stop()
        finished = await playing
        assert not finished
        times.append(time.monotonic() - started)
    return times


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:7.1f} ms, max {max(values) * 1000:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    costs = [vad_cost() for _ in range(args.repeat)]
    print(
        f"VAD + framing:            {statistics.median(costs) * 100:6.3f} % of a core"
        f"   (target <= 1 %)"
    )
    latencies = asyncio.run(reply_latency(args.turns))
    print(f"end of speech -> reply:   {ms(latencies)}   (target <= 300 ms, instant fakes)")
    with pulse_sink() as server:
        try:
            stops = asyncio.run(barge_in(args.repeat))
        except Exception as exc:  # no output device: say so instead of a figure
            print(f"barge-in -> silence:      not measured ({exc})")
        else:
            where = "PulseAudio null sink" if server else "default output"
            print(f"barge-in -> silence:      {ms(stops)}   (target <= 100 ms, {where})")


if __name__ == "__main__":
    main()
