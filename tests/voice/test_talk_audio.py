"""`habakkuk talk` on a real audio path: PulseAudio with null sinks, speech from espeak-ng
played into the microphone, the loop capturing it through sounddevice, a fake
transcription server, the mock model replying, and the reply read back from the speakers.

The speech engine is the `tts: espeak` provider (espeak-ng on this machine): real audio,
whose length the test knows by asking espeak-ng for the same words.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import pytest

from habakkuk.cli.talk import talk
from habakkuk.engine.home import Home
from habakkuk.voice.audio_io import PlayerSpeaker, open_speaker
from habakkuk.voice.talk import TalkLoop
from habakkuk.voice.wav import Pcm, read_wav
from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.voice.pulse import Pulse, pulse_server, record_speakers, sounding_seconds, speech_wav
from tests.voice.transcriber import Transcriber, transcriber

BOARD_REPLY = "Your board has **three** cards: the report, the invoice and the talk."
STORY = " ".join(
    f"Chapter {n}: the agent walked along the river and counted the stones one by one."
    for n in range(1, 7)
)
SCRIPT = f"""
- match: board
  steps:
    - text: "{BOARD_REPLY}"
- match: story
  steps:
    - text: "{STORY}"
- steps:
    - text: "Stopped."
"""


def seconds_spoken(text: str, pulse: Pulse) -> float:
    """How long espeak-ng takes to say `text` (the `tts: espeak` provider's voice)."""
    return read_wav(speech_wav(text, pulse.folder, "expected").read_bytes()).seconds


@pytest.fixture
def pulse(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pulse]:
    with pulse_server(monkeypatch) as server:
        yield server


@contextlib.asynccontextmanager
async def talking(
    write_config: WriteConfig, fake: Transcriber, wake: str | None
) -> AsyncIterator[TalkLoop]:
    """`habakkuk talk` running on the home until the block ends, speaking with espeak-ng."""
    write_config(
        mock_config(
            SCRIPT,
            extra=fake.config() + "talk:\n  silence: 500ms\ntts:\n  provider: espeak\n",
        )
    )
    loops: list[TalkLoop] = []
    args = argparse.Namespace(agent=None, session=None, wake=wake, no_wake=wake is None)
    task = asyncio.create_task(talk(args, started=loops.append))
    await eventually(lambda: loops or task.done(), what="talk to listen")
    assert not task.done(), task.result()
    try:
        yield loops[0]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def played(pulse: Pulse, wav: Path) -> None:
    await asyncio.to_thread(pulse.play_into_room, wav)


async def test_a_spoken_question_is_answered_aloud(
    pulse: Pulse, home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    question = speech_wav("hey habakkuk, what is on my board?", pulse.folder, "question")
    async with transcriber(["Hey Habakkuk, what's on my board?"]) as fake:
        recorder = await record_speakers(pulse)
        async with talking(write_config, fake, wake="hey habakkuk") as loop:
            await played(pulse, question)
            await eventually(lambda: loop.replies == 1, what="the reply to be said")
        await recorder.stop()
    # The microphone heard the question: one upload, about as long as the speech plus
    # the pre-roll and the silence that ended it.
    (upload,) = fake.uploads
    heard = read_wav(upload)
    spoken = read_wav(question.read_bytes()).seconds
    assert spoken < heard.seconds < spoken + 0.3 + 0.5 + 0.5
    assert sounding_seconds(heard.samples[:, 0]) > spoken * 0.7
    # The reply was printed, stripped for speech, and played to the end on the speakers.
    out = capsys.readouterr().out
    assert "you: what's on my board?" in out and BOARD_REPLY in out
    seconds = seconds_spoken(
        "Your board has three cards: the report, the invoice and the talk.", pulse
    )
    assert abs(sounding_seconds(recorder.samples()) - seconds) < 0.6


async def test_speech_while_a_reply_plays_stops_it(
    pulse: Pulse, home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    ask = speech_wav("tell me a story", pulse.folder, "ask")
    interrupt = speech_wav("stop, stop, that is enough", pulse.folder, "interrupt")
    async with transcriber(["tell me a story", "stop that is enough"]) as fake:
        recorder = await record_speakers(pulse)
        async with talking(write_config, fake, wake=None) as loop:
            await played(pulse, ask)
            await eventually(lambda: loop.timings.reply_audio_at > 0, what="the story to play")
            await played(pulse, interrupt)
            await eventually(lambda: loop.timings.stopped_at > 0, what="the story to stop")
            await eventually(lambda: loop.replies == 2, what="the interruption to be answered")
        await recorder.stop()
    story_seconds = seconds_spoken(STORY, pulse)
    assert story_seconds > 20
    # What reached the speakers: the start of the story (cut short), then "Stopped."
    assert sounding_seconds(recorder.samples()) < story_seconds / 2
    assert loop.timings.barge_at <= loop.timings.stopped_at
    assert "(interrupted)" in capsys.readouterr().out


async def test_an_external_player_plays_where_portaudio_cannot_and_stops_at_once(
    pulse: Pulse,
) -> None:
    speaker = open_speaker(None, "paplay")  # talk.player, or no PortAudio output device
    assert isinstance(speaker, PlayerSpeaker)
    assert isinstance(open_speaker(None, None), PlayerSpeaker)  # the first player found
    reply = Pcm(np.full((5 * 16_000, 1), 0.2, dtype=np.float32), 16_000)
    recorder = await record_speakers(pulse)
    playing = asyncio.create_task(speaker.play(reply))
    await eventually(lambda: sounding_seconds(recorder.samples()) > 0.5, what="the sound")
    speaker.stop()
    assert await playing is False
    await recorder.stop()
    assert 0.5 < sounding_seconds(recorder.samples()) < 4.0
