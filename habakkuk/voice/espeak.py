"""espeak: espeak-ng on this machine, offline and free (`espeak-ng --stdout` writes WAV).

The voice is an espeak-ng voice (en, en-us, de, fr+f3, ...). The text goes on stdin, so
nothing in it can be read as an option.
"""

from __future__ import annotations

import asyncio
import shutil

from . import audio
from .audio import AudioFormat, SpeechError

SPEAK_SECONDS = 120.0


class EspeakSpeech:
    """espeak-ng (or espeak) found on PATH when it speaks."""

    name = "espeak"

    async def speak(self, text: str, voice: str, format: AudioFormat) -> tuple[bytes, str]:
        binary = shutil.which("espeak-ng") or shutil.which("espeak")
        if binary is None:
            raise SpeechError("espeak: espeak-ng is not installed (e.g. apt install espeak-ng)")
        process = await asyncio.create_subprocess_exec(
            binary,
            "--stdout",
            "-v",
            voice,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(
                process.communicate(text.encode()), SPEAK_SECONDS
            )
        except TimeoutError:
            process.kill()
            await process.wait()
            raise SpeechError(f"espeak: took over {SPEAK_SECONDS:.0f}s") from None
        if process.returncode != 0 or audio.sniff(stdout) != audio.WAV:
            why = " ".join(stderr.decode(errors="replace").split())[:200] or "no audio"
            raise SpeechError(f"espeak: {why}")
        return audio.fixed_wav(stdout), audio.WAV
