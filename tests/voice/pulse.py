"""A real sound server without a sound card: PulseAudio with two null sinks.

`speakers` is the default sink (what `habakkuk talk` plays to; its monitor is read back)
and `room` is where the test plays speech; the default source `microphone` remaps the
room's monitor, so what is played into the room is what the microphone hears. PortAudio
reaches it through ALSA's pulse plugin (libasound2-plugins), as on a desktop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from tests.helpers import eventually_sync

TOOLS = ("pulseaudio", "pactl", "paplay", "parec", "espeak-ng")
RATE = 16_000


@dataclass
class Pulse:
    """The running server: its address and where its files live."""

    server: str
    folder: Path

    def env(self) -> dict[str, str]:
        """The environment of a client of this server."""
        return {**os.environ, "PULSE_SERVER": self.server}

    def play_into_room(self, wav: Path) -> None:
        """Play a WAV file into the room (the microphone hears it); returns when played."""
        subprocess.run(
            ["paplay", "--device=room", str(wav)], env=self.env(), check=True, timeout=60
        )


@dataclass
class Recorder:
    """What the speakers' monitor hears, as 16 kHz mono samples."""

    process: asyncio.subprocess.Process
    chunks: list[bytes] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.chunks.append(chunk)

    def samples(self) -> npt.NDArray[np.float32]:
        """Everything heard so far."""
        raw = b"".join(self.chunks)
        ints = np.frombuffer(raw[: len(raw) - len(raw) % 2], dtype="<i2")
        return ints.astype(np.float32) / 32768.0

    async def stop(self) -> None:
        """Stop recording."""
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        await self.process.wait()
        if self.task is not None:
            await self.task


async def record_speakers(pulse: Pulse) -> Recorder:
    """Start reading the speakers' monitor."""
    process = await asyncio.create_subprocess_exec(
        "parec",
        "--device=speakers.monitor",
        "--raw",
        "--format=s16le",
        f"--rate={RATE}",
        "--channels=1",
        "--latency-msec=20",
        env=pulse.env(),
        stdout=asyncio.subprocess.PIPE,
    )
    recorder = Recorder(process)
    recorder.task = asyncio.create_task(recorder._read())
    return recorder


def sounding_seconds(samples: npt.NDArray[np.float32], level: float = 0.01) -> float:
    """From the first to the last 20 ms window louder than `level` RMS."""
    frames = len(samples) // 320
    if not frames:
        return 0.0
    windows = samples[: frames * 320].reshape(frames, 320)
    loud = np.flatnonzero(np.sqrt(np.mean(np.square(windows), axis=1)) > level)
    return 0.0 if not loud.size else (loud[-1] - loud[0] + 1) * 0.02


def speech_wav(text: str, folder: Path, name: str) -> Path:
    """`text` spoken by espeak-ng, as a WAV file."""
    path = folder / f"{name}.wav"
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True, timeout=60)
    return path


@contextlib.contextmanager
def pulse_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pulse]:
    """Start PulseAudio (skipped where it or the tools are missing; under CI a skip fails)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian: pulseaudio pulseaudio-utils espeak-ng)")
    # A short path: a unix socket's path has a ~100-byte limit tmp_path can pass.
    folder = Path(tempfile.mkdtemp(prefix="hk-pulse-"))
    socket = folder / "native"
    env = {
        **os.environ,
        "HOME": str(folder),
        "XDG_RUNTIME_DIR": str(folder),
        "PULSE_RUNTIME_PATH": str(folder),
    }
    log = (folder / "pulse.log").open("wb")
    process = subprocess.Popen(
        [
            "pulseaudio",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
            "--disallow-exit",
            "-n",  # no default.pa: only the modules below
            f"--load=module-native-protocol-unix socket={socket} auth-anonymous=1",
            "--load=module-null-sink sink_name=speakers rate=16000 channels=1",
            "--load=module-null-sink sink_name=room rate=16000 channels=1",
            "--load=module-remap-source source_name=microphone master=room.monitor",
        ],
        env=env,
        stdout=log,
        stderr=log,
    )
    pulse = Pulse(f"unix:{socket}", folder)
    try:

        def up() -> bool:
            if process.poll() is not None:
                pytest.fail("pulseaudio exited: " + (folder / "pulse.log").read_text())
            probe = subprocess.run(["pactl", "info"], env=pulse.env(), capture_output=True)
            return probe.returncode == 0

        eventually_sync(up, what="PulseAudio to answer")
        for command in (["set-default-sink", "speakers"], ["set-default-source", "microphone"]):
            subprocess.run(["pactl", *command], env=pulse.env(), check=True)
        monkeypatch.setenv("PULSE_SERVER", pulse.server)
        # PortAudio lists the devices when it starts: restart it to find this server.
        import sounddevice

        sounddevice._terminate()
        sounddevice._initialize()
        yield pulse
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
