"""The microphone and the speakers, in-process through sounddevice (PortAudio).

Capture: an InputStream at 16 kHz mono whose callback (on PortAudio's thread) hands each
20 ms frame to the event loop thread-safely. Playback: an OutputStream fed from the
decoded reply, stopped at once (`abort` drops what PortAudio holds) for barge-in. Where
PortAudio has no output device, an external player (ffplay, paplay, aplay, afplay, or
`talk.player`) plays a WAV file instead, killed to stop.

What is missing (the sounddevice package, the PortAudio library, an input device) is an
AudioUnavailable whose message is one line naming what to install.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from habakkuk.engine.errors import HabakkukError, first_line

from .detector import FRAME, RATE, Frame
from .wav import Pcm, to_wav

INSTALL = (
    "on Debian or Ubuntu: apt install libportaudio2 libasound2-plugins "
    "(the plugins let PortAudio's ALSA reach PulseAudio or PipeWire); "
    "on macOS: brew install portaudio"
)
PLAYERS = ("ffplay", "paplay", "aplay", "afplay")
_PLAYER_ARGS = {
    "ffplay": ["-nodisp", "-autoexit", "-loglevel", "quiet"],
    "paplay": [],
    "aplay": ["-q"],
    "afplay": [],
}
QUEUE_FRAMES = 1500  # 30 s of frames waiting; past that the oldest are the ones lost


class AudioUnavailable(HabakkukError):
    """No way to hear or to speak here; the message says what to install or plug in."""


def load_sounddevice() -> ModuleType:
    """The sounddevice module; AudioUnavailable when it or PortAudio is missing."""
    try:
        import sounddevice
    except ImportError:
        raise AudioUnavailable(
            "sounddevice is not installed: pip install 'habakkuk[voice]'"
        ) from None
    except OSError:  # sounddevice found no PortAudio library
        raise AudioUnavailable(f"the PortAudio library is not installed: {INSTALL}") from None
    module: ModuleType = sounddevice
    return module


class Microphone:
    """The input device, 20 ms frames of 16 kHz mono float32 from `frames()`."""

    def __init__(self, sd: ModuleType, device: int | str | None = None) -> None:
        self._sd = sd
        self._device = device
        self._queue: asyncio.Queue[Frame] = asyncio.Queue(QUEUE_FRAMES)
        self._stream: Any = None
        self.lost = 0  # frames dropped because the loop fell 30 s behind

    def open(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start capturing into `loop` (default: the running one; give it to open the
        device on a worker thread); AudioUnavailable when there is no input device."""
        loop = loop or asyncio.get_running_loop()

        def put(frame: Frame) -> None:
            if self._queue.full():
                self._queue.get_nowait()
                self.lost += 1
            self._queue.put_nowait(frame)

        def callback(indata: Any, frames: int, time: Any, status: Any) -> None:
            # PortAudio's thread: copy (the buffer is reused) and hand over to the loop.
            loop.call_soon_threadsafe(put, np.array(indata[:, 0], dtype=np.float32))

        try:
            self._stream = self._sd.InputStream(
                samplerate=RATE,
                channels=1,
                dtype="float32",
                blocksize=FRAME,
                device=self._device,
                callback=callback,
            )
            self._stream.start()
        except (self._sd.PortAudioError, ValueError) as exc:
            self._stream = None
            which = f"input device {self._device!r}" if self._device is not None else "microphone"
            raise AudioUnavailable(
                f"no {which} to listen with ({first_line(exc)}); plug one in or set "
                f"talk.device; {INSTALL}"
            ) from None

    async def frame(self) -> Frame:
        """The next frame (waits for it)."""
        return await self._queue.get()

    def close(self) -> None:
        """Stop capturing."""
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.abort()
                stream.close()


class Speaker(Protocol):
    """Where replies are played."""

    async def play(self, pcm: Pcm) -> bool:
        """Play it to the end (True) or until `stop` (False)."""
        ...

    def stop(self) -> None:
        """Stop what plays, at once; nothing when nothing plays."""
        ...


class StreamSpeaker:
    """Playback through a sounddevice OutputStream, at the audio's own rate."""

    def __init__(self, sd: ModuleType, device: int | str | None = None) -> None:
        self._sd = sd
        self._device = device
        self._stream: Any = None
        self._stopped = threading.Event()

    async def play(self, pcm: Pcm) -> bool:
        """Feed PortAudio from the samples until they end or `stop` aborts the stream."""
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        samples = np.ascontiguousarray(pcm.samples, dtype=np.float32)
        position = 0
        self._stopped.clear()

        def callback(outdata: Any, frames: int, time: Any, status: Any) -> None:
            nonlocal position
            chunk = samples[position : position + frames]
            outdata[: len(chunk)] = chunk
            outdata[len(chunk) :] = 0
            position += len(chunk)
            if len(chunk) < frames:
                raise self._sd.CallbackStop

        def finished() -> None:  # returns nothing: cffi passes the result back to C
            loop.call_soon_threadsafe(done.set)

        stream = self._sd.OutputStream(
            samplerate=pcm.rate,
            channels=samples.shape[1],
            dtype="float32",
            device=self._device,
            callback=callback,
            finished_callback=finished,
        )
        self._stream = stream
        try:
            stream.start()
            await done.wait()
        finally:
            self._stream = None
            with contextlib.suppress(Exception):
                stream.close()
        return not self._stopped.is_set()

    def stop(self) -> None:
        """Abort the stream: PortAudio drops its buffers, so the sound ends now."""
        stream = self._stream
        if stream is not None:
            self._stopped.set()
            with contextlib.suppress(Exception):
                stream.abort()


class PlayerSpeaker:
    """Playback with an external program on a WAV file; killed to stop."""

    def __init__(self, program: str) -> None:
        self.program = program
        self._process: asyncio.subprocess.Process | None = None
        self._stopped = False

    async def play(self, pcm: Pcm) -> bool:
        """Write the WAV, run the player on it, wait for it to end or be killed."""
        self._stopped = False
        mono = pcm.samples.mean(axis=1) if pcm.samples.ndim == 2 else pcm.samples
        fd, name = tempfile.mkstemp(prefix="habakkuk-talk-", suffix=".wav")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(to_wav(mono.astype(np.float32), pcm.rate))
            self._process = await asyncio.create_subprocess_exec(
                self.program,
                *_PLAYER_ARGS.get(Path(self.program).name, []),
                name,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            await self._process.wait()
        finally:
            self._process = None
            Path(name).unlink(missing_ok=True)
        return not self._stopped

    def stop(self) -> None:
        """Kill the player."""
        process = self._process
        if process is not None and process.returncode is None:
            self._stopped = True
            with contextlib.suppress(ProcessLookupError):
                process.kill()


def open_speaker(sd: ModuleType | None, player: str | None) -> Speaker:
    """Where to play: `player` when configured, else PortAudio's output device, else the
    first external player found; AudioUnavailable when there is none."""
    if player:
        found = shutil.which(player)
        if found is None:
            raise AudioUnavailable(f"talk.player {player!r} is not on PATH")
        return PlayerSpeaker(found)
    if sd is not None:
        try:
            sd.query_devices(kind="output")
            return StreamSpeaker(sd)
        except (sd.PortAudioError, ValueError):
            pass  # no output device PortAudio can reach: an external player may
    for name in PLAYERS:
        found = shutil.which(name)
        if found is not None:
            return PlayerSpeaker(found)
    raise AudioUnavailable(
        f"no output device and no player ({', '.join(PLAYERS)}) to speak with; {INSTALL}"
    )


def tone(seconds: float = 0.15, hertz: float = 880.0, rate: int = RATE) -> Pcm:
    """The short tone that says "listening" after the wake phrase alone."""
    t = np.arange(round(seconds * rate), dtype=np.float32) / rate
    fade = np.minimum(1.0, np.minimum(t, seconds - t) * 50).astype(np.float32)
    wave = (0.3 * np.sin(2 * np.pi * hertz * t) * fade).astype(np.float32)
    return Pcm(wave.reshape(-1, 1), rate)
