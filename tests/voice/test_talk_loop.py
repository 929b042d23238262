"""The voice loop's turn-taking on synthetic audio: the real runtime and mock model, a
transcriber and a speech engine at their boundaries, the speakers noting what they play.

What it hears is what a microphone would give (20 ms frames of tone and quiet), so the
detector, the wake gate and the turns run as in `habakkuk talk`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import numpy as np

from habakkuk.voice.audio_io import tone
from habakkuk.voice.detector import FRAME, RATE, DetectorSettings, Frame
from habakkuk.voice.speech_types import AudioFormat, SpokenAudio
from habakkuk.voice.talk import TalkLoop, TalkSettings
from habakkuk.voice.wav import Pcm, read_wav, to_wav
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import eventually

SCRIPT = """
- match: board
  steps:
    - text: "Three **cards**."
- steps:
    - text: "Noted: {input}"
"""


class Room:
    """The microphone: frames the test says, then quiet forever."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Frame] = asyncio.Queue()

    def speak(self, seconds: float = 0.6) -> None:
        t = np.arange(int(seconds * RATE), dtype=np.float32) / RATE
        speech = (0.2 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
        quiet = np.zeros(int(0.6 * RATE), dtype=np.float32)
        audio = np.concatenate([quiet, speech, quiet])
        for i in range(0, len(audio) - FRAME + 1, FRAME):
            self.queue.put_nowait(audio[i : i + FRAME])

    async def frame(self) -> Frame:
        return await self.queue.get()


class Speakers:
    """Play nothing; note the length of each sound played (or fail, as unplugged ones do)."""

    def __init__(self) -> None:
        self.played: list[float] = []
        self.unplugged = False

    async def play(self, pcm: Pcm) -> bool:
        if self.unplugged:
            raise OSError("Error opening OutputStream: Device unavailable")
        self.played.append(round(pcm.seconds, 2))
        return True

    def stop(self) -> None:
        pass


class Speech:
    """A speech engine: 0.5 s of sound per reply, or a failure when told to."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.said: list[str] = []

    async def synthesize(
        self, text: str, voice: str | None = None, *, format: AudioFormat = "ogg_opus"
    ) -> SpokenAudio:
        if self.fail:
            raise ConnectionError("the speech service is down")
        self.said.append(text)
        return SpokenAudio(to_wav(np.full(RATE // 2, 0.1, dtype=np.float32)), "audio/wav", 0.5)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def loop_on(
    runtime_factory: OpenRuntime,
    heard: list[str] | Callable[[bytes], str],
    *,
    wake: tuple[str, ...] = (),
    speech: Speech | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[tuple[TalkLoop, Room, Speakers, list[str]]]:
    runtime = await runtime_factory(mock_config(SCRIPT))
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session(None, origin="cli")
    room, speakers = Room(), Speakers()
    lines: list[str] = []
    script = list(heard) if isinstance(heard, list) else []

    async def transcribe(wav: bytes) -> str:
        if callable(heard):
            return heard(wav)
        return script.pop(0) if script else ""

    loop = TalkLoop(
        microphone=room,
        speaker=speakers,
        transcribe=transcribe,
        turns=runtime.turns,
        session_id=session.id,
        synthesizer=speech or Speech(),
        settings=TalkSettings(detector=DetectorSettings(silence_s=0.4), wake=wake),
        tone=tone(),
        say=lines.append,
        clock=clock or Clock(),
    )
    task = asyncio.create_task(loop.run())
    try:
        yield loop, room, speakers, lines
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_each_utterance_is_a_turn_whose_reply_is_printed_and_said(
    runtime_factory: OpenRuntime,
) -> None:
    speech = Speech()
    async with loop_on(runtime_factory, ["what's on my board"], speech=speech) as parts:
        loop, room, speakers, lines = parts
        room.speak()
        await eventually(lambda: loop.replies == 1, what="the reply")
    assert lines == ["you: what's on my board", "Three **cards**.\n"]
    assert speech.said == ["Three cards."] and speakers.played == [0.5]


async def test_the_wake_phrase_alone_plays_the_tone_and_the_next_words_need_none(
    runtime_factory: OpenRuntime,
) -> None:
    heard = ["what a day", "hey habakkuk", "what's on my board"]
    async with loop_on(runtime_factory, heard, wake=("hey habakkuk",)) as parts:
        loop, room, speakers, lines = parts
        room.speak()
        await eventually(lambda: "· (not for me) what a day" in lines, what="the first")
        room.speak()
        await eventually(lambda: "· listening" in lines, what="the tone")
        assert speakers.played == [0.15]
        room.speak()
        await eventually(lambda: loop.replies == 1, what="the reply")
    assert lines[-2:] == ["you: what's on my board", "Three **cards**.\n"]


async def test_after_the_follow_up_window_the_wake_phrase_is_needed_again(
    runtime_factory: OpenRuntime,
) -> None:
    clock = Clock()
    heard = ["hey habakkuk what's on my board", "and tomorrow", "and next week"]
    async with loop_on(runtime_factory, heard, wake=("hey habakkuk",), clock=clock) as parts:
        loop, room, _, lines = parts
        room.speak()
        await eventually(lambda: loop.replies == 1, what="the first reply")
        clock.now += 29
        room.speak()
        await eventually(lambda: loop.replies == 2, what="the follow-up's reply")
        clock.now += 31
        room.speak()
        await eventually(lambda: "· (not for me) and next week" in lines, what="the third")
    assert "you: and tomorrow" in lines and "Noted: and tomorrow\n" in lines


async def test_when_speaking_fails_the_reply_is_printed_and_the_loop_goes_on(
    runtime_factory: OpenRuntime,
) -> None:
    speech = Speech(fail=True)
    async with loop_on(runtime_factory, ["first", "second"], speech=speech) as parts:
        loop, room, speakers, lines = parts
        room.speak()
        await eventually(lambda: loop.replies == 1, what="the first reply")
        room.speak()
        await eventually(lambda: loop.replies == 2, what="the second reply")
    assert lines.count("! speaking failed: the speech service is down") == 2
    assert "Noted: second\n" in lines and speakers.played == []


async def test_a_click_is_not_an_utterance(runtime_factory: OpenRuntime) -> None:
    def length(wav: bytes) -> str:
        return f"{read_wav(wav).seconds:.1f} seconds"

    async with loop_on(runtime_factory, length) as parts:
        loop, room, _, lines = parts
        room.speak(seconds=0.1)
        room.speak()  # then real speech, so the test knows the click went by
        await eventually(lambda: loop.replies == 1, what="the reply")
    # The words alone, with their pre-roll and the silence that ended them.
    assert lines[0] == f"you: {0.3 + 0.6 + 0.4:.1f} seconds"


async def test_when_the_speakers_fail_it_is_said_and_the_loop_goes_on(
    runtime_factory: OpenRuntime,
) -> None:
    async with loop_on(runtime_factory, ["first", "second"]) as parts:
        loop, room, speakers, lines = parts
        speakers.unplugged = True
        room.speak()
        await eventually(lambda: loop.replies == 1, what="the first reply")
        speakers.unplugged = False
        room.speak()
        await eventually(lambda: loop.replies == 2, what="the second reply")
    assert "! playing failed: Error opening OutputStream: Device unavailable" in lines
    assert speakers.played == [0.5]
