"""espeak: espeak-ng on this machine, offline and free (`espeak-ng --stdout` writes WAV).

The voice is an espeak-ng voice (en, en-us, de, fr+f3, ...). The text goes on stdin, so
nothing in it can be read as an option.
"""

from __future__ import annotations

import shutil

from . import audio
from .audio import SpeechError
from .speech_types import AudioFormat

SPEAK_SECONDS = 120.0


class EspeakSpeech:
    """espeak-ng (or espeak) found on PATH when it speaks."""

    name = "espeak"

    async def speak(self, text: str, voice: str, format: AudioFormat) -> tuple[bytes, str]:
        binary = shutil.which("espeak-ng") or shutil.which("espeak")
        if binary is None:
            raise SpeechError("espeak: espeak-ng is not installed (e.g. apt install espeak-ng)")
        command = [binary, "--stdout", "-v", voice]
        stdout, stderr, code = await audio.run_piped(
            command, text.encode(), SPEAK_SECONDS, "espeak"
        )
        if code != 0 or audio.sniff(stdout) != audio.WAV:
            why = " ".join(stderr.decode(errors="replace").split())[:200] or "no audio"
            raise SpeechError(f"espeak: {why}")
        return audio.fixed_wav(stdout), audio.WAV
