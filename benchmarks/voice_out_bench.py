"""What a voice reply costs beyond the text reply (issue 31, voice out).

Two pairs, each measured in alternating runs within one invocation (a shared machine:
compare the ratio, not the absolutes):

1. The text's preparation. Baseline: rendering a 2,000-character Markdown reply for
   Telegram (channels/format.markdown_chunks), which every reply pays. Ours: the same
   reply made speakable (Markdown stripped with markdown-it, cut at a sentence to
   tts.max_chars) and the length of a 60-second voice note read from its Ogg pages.
2. The audio. Baseline: espeak-ng speaking the reply as WAV (the provider's own time, on
   this machine). Ours: the same plus ffmpeg making it a voice note (Ogg Opus), which is
   what a voice note costs over the provider when it does not speak Opus itself.

Run: python benchmarks/voice_out_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import time

REPLY = (
    "## What is on the board\n\n"
    + "".join(
        f"- **Card {i}**: review the [pull request](https://example.org/pr/{i}) "
        f"and `merge` it when the checks pass. It is due on day {i}.\n"
        for i in range(1, 16)
    )
    + "\n```sh\nhabakkuk board list --status open\n```\n\nThat is all for today. " * 2
)[:2000]


def ogg_note(seconds: float) -> bytes:
    """An Ogg Opus stream of `seconds` in 20 ms pages (what a duration is read from)."""
    pages = [
        b"OggS\x00\x02" + struct.pack("<q", 0) + b"\x00" * 13 + b"OpusHead\x01\x01" + b"\x38\x01"
    ]
    for n in range(1, int(seconds * 50) + 1):
        pages.append(
            b"OggS\x00\x00" + struct.pack("<q", 312 + n * 960) + b"\x00" * 13 + b"\xfc" * 40
        )
    return b"".join(pages)


def text_baseline() -> float:
    from habakkuk.channels.format import markdown_chunks

    started = time.perf_counter()
    markdown_chunks(REPLY)
    return time.perf_counter() - started


def text_ours(note: bytes) -> float:
    from habakkuk.voice.audio import duration
    from habakkuk.voice.spoken_text import reply_speech

    started = time.perf_counter()
    reply_speech(REPLY, 2000)
    duration(note)
    return time.perf_counter() - started


async def audio_pair(text: str) -> tuple[float, float]:
    from habakkuk.voice.audio import convert
    from habakkuk.voice.espeak import EspeakSpeech

    speech = EspeakSpeech()
    started = time.perf_counter()
    wav, _ = await speech.speak(text, "en", "wav")
    spoken = time.perf_counter() - started
    converted = await convert(wav, "ogg_opus")
    assert converted is not None, "ffmpeg is needed for this benchmark"
    return spoken, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    from habakkuk.voice.spoken_text import reply_speech

    note = ogg_note(60.0)
    text_ours(note)  # imports and markdown-it's first parse, outside the figures
    text_baseline()
    base, ours = [], []
    for _ in range(args.runs * 20):
        base.append(text_baseline())
        ours.append(text_ours(note))
    b, o = statistics.median(base), statistics.median(ours)
    print(
        f"text prep per reply      render for Telegram {b * 1e3:7.3f} ms   "
        f"speakable + note length {o * 1e3:7.3f} ms   ratio {o / b:5.2f}"
    )
    spoken_text = reply_speech(REPLY, 2000)
    pairs = [asyncio.run(audio_pair(spoken_text)) for _ in range(args.runs)]
    speak = statistics.median(p[0] for p in pairs)
    whole = statistics.median(p[1] for p in pairs)
    print(
        f"audio per reply          espeak-ng WAV       {speak:7.3f} s    "
        f"+ ffmpeg to Ogg Opus    {whole:7.3f} s    ratio {whole / speak:5.2f}"
    )


if __name__ == "__main__":
    main()
